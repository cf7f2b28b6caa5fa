"""CheckpointInfo: the frozen, typed facts about a checkpoint that rules and the memory budget use.

Read from config.json, tokenizer files, the safetensors index and safetensors headers; never from
weights. `None` means "not known" (file absent or field missing), never "zero".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

CheckpointSource = Literal["local", "hf-cache", "hub", "catalog"]
EagleGeneration = Literal["eagle1", "eagle3"]
HeadFormat = Literal["raw", "speculators", "specforge", "modelopt"]

# RoPE scalings that extend the context beyond what the config's max positions already say.
_ROPE_EXTENDING = frozenset({"yarn", "linear", "dynamic"})


@dataclass(frozen=True)
class TokenizerInfo:
    """What identifies a tokenizer's content, not just its size."""

    fingerprint: str
    """sha256 over the sorted token->id mapping, added tokens and special tokens."""
    vocab_len: int
    """Number of distinct token ids the tokenizer can produce (including added tokens)."""
    bos_token: str | None = None
    eos_token: str | None = None
    source_file: str = "tokenizer.json"
    vocab_fingerprint: str | None = None
    """sha256 over the base vocabulary only (no added or special tokens): equal when two
    tokenizers differ only in added tokens (e.g. Qwen3 = Qwen2.5 + 4 added tokens)."""


@dataclass(frozen=True)
class EagleHeadInfo:
    """Facts that tie an EAGLE / EAGLE-3 head to the target it was trained for."""

    generation: EagleGeneration
    format: HeadFormat
    hidden_size: int | None
    target_hidden_size: int | None
    """Hidden size of the target the head reads from (`target_hidden_size`, else its own)."""
    vocab_size: int | None
    draft_vocab_size: int | None
    has_d2t: bool | None
    aux_layer_ids: tuple[int, ...] | None
    verifier_name: str | None = None
    verifier_architectures: tuple[str, ...] = ()
    target_hidden_size_from: str | None = None
    """Where target_hidden_size came from when the head's own config does not say: the verifier
    the catalog records for it (whose hidden states the head reads), e.g. "Qwen/Qwen3-8B"."""


@dataclass(frozen=True)
class RecurrentState:
    """The state one linear-attention (Gated DeltaNet) or Mamba-2 layer keeps per sequence,
    whatever its length: a short convolution window and a recurrent state matrix per head."""

    kind: Literal["gated_delta_net", "mamba2"]
    conv_channels: int
    """Channels of the convolution state (split across TP ranks)."""
    conv_kernel: int
    """The convolution keeps `conv_kernel - 1` past positions (plus one per speculative token)."""
    state_heads: int
    """Heads of the recurrent state (split across TP ranks)."""
    state_dims: tuple[int, int]
    state_dtype: str | None
    """dtype of the recurrent state when the config fixes one (`mamba_ssm_cache_dtype`); the
    model dtype otherwise."""


@dataclass(frozen=True)
class CheckpointInfo:
    """A checkpoint's metadata and where it came from."""

    ref: str
    """The model as the profile names it (hub id or path)."""
    source: CheckpointSource
    """Where the metadata was found: local directory, HF cache, hub, or the built-in catalog."""
    location: str
    """Human-readable origin: a directory, a cache snapshot path, or a catalog source citation."""
    revision: str | None = None
    architectures: tuple[str, ...] = ()
    model_type: str | None = None
    hidden_size: int | None = None
    num_hidden_layers: int | None = None
    num_attention_heads: int | None = None
    num_key_value_heads: int | None = None
    head_dim: int | None = None
    intermediate_size: int | None = None
    vocab_size: int | None = None
    max_position_embeddings: int | None = None
    rope_scaling_factor: float | None = None
    original_max_position_embeddings: int | None = None
    rope_type: str | None = None
    """`rope_scaling.rope_type` (or legacy `type`): "yarn", "llama3", "linear", "dynamic", ..."""
    torch_dtype: str | None = None
    tie_word_embeddings: bool | None = None
    # MoE
    num_experts: int | None = None
    num_experts_per_tok: int | None = None
    moe_intermediate_size: int | None = None
    num_shared_experts: int | None = None
    first_k_dense_replace: int | None = None
    mlp_types: tuple[str, ...] | None = None
    """Per-layer feed-forward kind ("dense", "moe" or "none"), derived from however the config
    places its MoE layers (orchestrator.checkpoint.layers.mlp_kinds); None for a dense model."""
    dense_intermediate_size: int | None = None
    """Width of the dense layers' MLP when it differs from `intermediate_size` (Llama 4
    `intermediate_size_mlp`)."""
    shared_expert_intermediate_size: int | None = None
    """Summed width of one MoE layer's shared experts (None: no shared expert)."""
    moe_latent_size: int | None = None
    """Latent MoE (Nemotron 3 Super): routed experts read and write this width, between a
    hidden -> latent and a latent -> hidden projection."""
    gated_mlp: bool = True
    """Three matrices per MLP / expert (gate, up, down); False for two (Nemotron-H relu2)."""
    linear_mixer_params: int | None = None
    """Parameters of one linear-attention / Mamba mixer (layers of kind linear_attention)."""
    # MLA (DeepSeek V2/V3)
    kv_lora_rank: int | None = None
    q_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    qk_nope_head_dim: int | None = None
    v_head_dim: int | None = None
    # Hybrid / sliding-window attention
    sliding_window: int | None = None
    layer_types: tuple[str, ...] | None = None
    """Per-layer kind ("full_attention", "sliding_attention", "chunked_attention",
    "linear_attention" or "mlp"), derived from however the config spells it
    (orchestrator.checkpoint.layers); None when every layer is full attention."""
    attention_chunk_size: int | None = None
    """Tokens a chunked-attention layer attends to (Llama 4)."""
    recurrent_state: RecurrentState | None = None
    """Shape of the per-sequence state of linear-attention / Mamba layers."""
    vision_params: int | None = None
    """Parameters of the vision tower and projector of a multimodal checkpoint, from its
    `vision_config` (counted in the weights when no weight index gives the size)."""
    # MTP
    mtp_layers: int = 0
    """MTP layers the config declares (num_nextn_predict_layers, mtp_num_hidden_layers, ...)."""
    mtp_tensor_count: int | None = None
    """Tensors of MTP layers found in the weight index; None when no index was available."""
    # Quantization and size
    quant_method: str | None = None
    quant_bits: float | None = None
    param_count: int | None = None
    weight_bytes: int | None = None
    """Exact bytes of all weights (index metadata.total_size or safetensors headers)."""
    published_param_count: int | None = None
    """The total parameter count the publisher states (model card, or an index's total_size over
    its dtype), built-in catalog only; what the count from config.json is checked against."""
    custom_code: tuple[str, ...] = ()
    """config.json `auto_map` entries ("AutoModelForCausalLM=modeling_x.XForCausalLM"): the
    repository ships model code the engine runs only with trust_remote_code."""
    tokenizer: TokenizerInfo | None = None
    eagle: EagleHeadInfo | None = None
    missing: tuple[str, ...] = field(default=())
    """Files that were looked for and not found (rules say they could not check)."""
    tokenizer_family: str | None = None
    """Documented tokenizer family id (built-in catalog only, e.g. "qwen3", "llama3"), used to
    compare tokenizers when the files themselves are not available."""
    unverified: tuple[str, ...] = field(default=())
    """Fields whose value the source could not confirm (catalog entries); rules treat them as
    unknown rather than trusting the default."""
    sources: tuple[str, ...] = field(default=())
    """Citations for catalog facts (repository@commit:path or URL); empty for read files."""

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank is not None

    @property
    def resolved_head_dim(self) -> int | None:
        if self.head_dim is not None:
            return self.head_dim
        if self.hidden_size and self.num_attention_heads:
            return self.hidden_size // self.num_attention_heads
        return None

    @property
    def kv_heads(self) -> int | None:
        return self.num_key_value_heads or self.num_attention_heads

    @property
    def max_context(self) -> int | None:
        """Longest sequence the config supports, as vLLM derives it: `max_position_embeddings`,
        except for RoPE scalings that extend it (yarn: original x factor; linear/dynamic:
        max_position_embeddings x factor). llama3/longrope/su already count the extension in
        max_position_embeddings. Source: vLLM `_get_and_verify_max_len` (vllm/config/model.py)."""
        base = self.max_position_embeddings
        if self.rope_type in _ROPE_EXTENDING and self.rope_scaling_factor:
            if self.rope_type == "yarn" and self.original_max_position_embeddings:
                base = self.original_max_position_embeddings
            if base is not None:
                return int(base * self.rope_scaling_factor)
        return base


@dataclass(frozen=True)
class Unresolved:
    """A model the profile names whose metadata could not be found anywhere allowed."""

    field: str
    """Profile field path, e.g. "target.model" or "proposer.model"."""
    model: str
    revision: str | None
    tried: tuple[str, ...]
    """Each place looked, in order, with why it failed (e.g. "hub: skipped (offline)")."""
    unreadable: str | None = None
    """The metadata file that was found but could not be used, with its key and problem."""

    def suggestion(self) -> str:
        """How to make this model resolvable: the smallest thing the user can do."""
        if self.unreadable is not None:
            again = (
                ""
                if looks_like_path(self.model)
                else f" (`huggingface-cli download {self.model} --force-download --include "
                "config.json 'tokenizer*' '*.index.json'`)"
            )
            return (
                f"repair or replace {self.unreadable.split(': ', 1)[0]}: specdeploy reads only "
                f"well-formed metadata; download the checkpoint's files again{again} or point "
                f"{self.field} at a directory whose files are intact"
            )
        if looks_like_path(self.model):
            return (
                f"fix the path in {self.field} (relative paths resolve against the profile's "
                "directory) so it names a directory with config.json, or use a hub id (org/name)"
            )
        revision_flag = f" --revision {self.revision}" if self.revision else ""
        section = self.field.rsplit(".", 1)[0]
        fix = (
            f"download the metadata once: `huggingface-cli download {self.model}{revision_flag} "
            f"--include config.json 'tokenizer*' '*.index.json'`; or pin {section}.revision to a "
            f"commit already in the cache; or set {self.field} to a local directory with "
            "config.json"
        )
        if any(t.startswith(HUB_SKIPPED) for t in self.tried):
            return fix + "; or drop --offline / unset HF_HUB_OFFLINE so the hub can be asked"
        if any(t.startswith(HUB_SILENT) for t in self.tried):
            return fix + (
                "; or make the hub answer (check HF_ENDPOINT, the proxy variables and the "
                "network), then validate again"
            )
        return fix


#: How `tried` entries begin when the hub was not asked, or did not answer usefully (written by
#: checkpoint.resolution).
HUB_SKIPPED = "hub: skipped (offline"
HUB_SILENT = ("hub: unreachable", "hub: did not answer", "hub: answered HTTP 5")


def looks_like_path(model: str) -> bool:
    """A string meant as a directory: starts with '.', '/' or '~', or has more than one '/'."""
    return model.startswith((".", "/", "~")) or model.count("/") > 1
