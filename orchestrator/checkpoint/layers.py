"""What each decoder layer keeps per sequence, from every way config.json spells it.

Two things make this more than reading `layer_types`:

- transformers writes config.json with only the values that differ from the config class's
  defaults (`PretrainedConfig.to_diff_dict`; a nested `text_config` through
  `recursive_diff_dict`), so a multimodal wrapper's `text_config` often lacks the language model's
  head counts, vocabulary or window pattern (google/gemma-3-4b-it names 6 text keys). The engine
  reads them from the class, and so must we: `CLASS_DEFAULTS`.
- Families spell the per-layer pattern differently: an explicit `layer_types` (gpt-oss, Qwen3.5),
  an interval (`full_attention_interval`, Qwen3-Next), a period (`sliding_window_pattern`, Gemma
  3), a fixed alternation (Gemma 2), NoPE layers between chunked-attention ones (Llama 4), a
  pattern string (`hybrid_override_pattern`, Nemotron-H). `layer_kinds` turns each into one
  tuple of kinds, as the config class derives it.

Sources: the config classes of transformers v5.19.0,
https://github.com/huggingface/transformers/blob/v5.19.0/src/transformers/models/<family>/configuration_<family>.py
(gemma2 `layer_types` in `__post_init__`, gemma3 `_sliding_window_pattern`, qwen3_next and qwen3_5
`full_attention_interval`, llama4 `no_rope_layers` / `no_rope_layer_interval`, nemotron_h
`_pattern_to_list`), and the base `to_diff_dict` in
https://github.com/huggingface/transformers/blob/v5.19.0/src/transformers/configuration_utils.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from orchestrator.checkpoint import files
from orchestrator.checkpoint.info import RecurrentState

#: The Gated-DeltaNet layout Qwen3-Next and Qwen3.5 share (their config classes' defaults).
_GATED_DELTANET: Final[Mapping[str, Any]] = {
    "full_attention_interval": 4,
    "linear_conv_kernel_dim": 4,
    "linear_key_head_dim": 128,
    "linear_value_head_dim": 128,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 32,
}
#: model_type -> the class defaults of the keys specdeploy reads, for keys config.json omits.
#: Only families whose configs are known to omit them (nested text configs, and Gemma's tied
#: embeddings, which equal the base default and so are never written).
CLASS_DEFAULTS: Final[Mapping[str, Mapping[str, Any]]] = {
    "gemma": {"tie_word_embeddings": True},
    "gemma2": {"tie_word_embeddings": True},
    "gemma3_text": {
        "vocab_size": 262208,
        "hidden_size": 2304,
        "intermediate_size": 9216,
        "num_hidden_layers": 26,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "max_position_embeddings": 131072,
        "sliding_window": 4096,
        "sliding_window_pattern": 6,
        "tie_word_embeddings": True,
    },
    "llama4_text": {
        "vocab_size": 202048,
        "hidden_size": 5120,
        "intermediate_size": 8192,
        "num_hidden_layers": 48,
        "num_attention_heads": 40,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "max_position_embeddings": 131072,
        "attention_chunk_size": 8192,
        "no_rope_layer_interval": 4,
        "num_local_experts": 16,
        "num_experts_per_tok": 1,
        "tie_word_embeddings": False,
    },
    "qwen3_next": _GATED_DELTANET,
    "qwen3_5_text": {**_GATED_DELTANET, "vocab_size": 248320, "tie_word_embeddings": False},
    "qwen3_5_moe_text": {**_GATED_DELTANET, "vocab_size": 248320, "tie_word_embeddings": False},
    "nemotron_h": {
        "ssm_state_size": 128,
        "mamba_num_heads": 128,
        "mamba_head_dim": 64,
        "n_groups": 8,
        "conv_kernel": 4,
        "mamba_ssm_cache_dtype": "float32",
    },
}

#: Layer kinds as specdeploy names them (what each costs per sequence).
FULL, SLIDING, CHUNKED, LINEAR, NONE = (
    "full_attention",
    "sliding_attention",
    "chunked_attention",
    "linear_attention",
    "mlp",
)
#: Spellings of `layer_types` / `layers_block_type` entries -> kind.
_KIND_SPELLINGS: Final[Mapping[str, str]] = {
    "full_attention": FULL,
    "attention": FULL,
    "global": FULL,
    "full": FULL,
    "sliding_attention": SLIDING,
    "sliding": SLIDING,
    "local": SLIDING,
    "chunked_attention": CHUNKED,
    "linear_attention": LINEAR,
    "mamba": LINEAR,
    "mamba2": LINEAR,
    "linear": LINEAR,
    "mlp": NONE,
    "moe": NONE,
}
#: Nemotron-H `hybrid_override_pattern` characters (transformers `_pattern_to_list`).
_PATTERN_CHARS: Final[Mapping[str, str]] = {"M": LINEAR, "*": FULL, "-": NONE, "E": NONE}


def with_class_defaults(scope: Mapping[str, Any]) -> Mapping[str, Any]:
    """`scope` with the class defaults of its model_type filled in where a key is absent."""
    model_type = scope.get("model_type")
    defaults = CLASS_DEFAULTS.get(model_type) if isinstance(model_type, str) else None
    if not defaults:
        return scope
    return {**defaults, **scope}


def layer_kinds(scope: Mapping[str, Any], layers: int | None) -> tuple[str, ...] | None:
    """Each decoder layer's kind (FULL, SLIDING, CHUNKED, LINEAR or NONE), or None when the
    config states no pattern (every layer is then full attention)."""
    explicit = scope.get("layer_types", scope.get("layers_block_type"))
    if explicit is not None:
        return tuple(_kind(k) for k in files.strings(explicit, "layer_types"))
    pattern = files.text(scope.get("hybrid_override_pattern"), "hybrid_override_pattern")
    if pattern is not None:
        unknown = sorted(set(pattern) - set(_PATTERN_CHARS))
        if unknown:
            raise files.BadValue(
                "hybrid_override_pattern", f"has an unknown layer kind {unknown[0]!r} (M, *, -, E)"
            )
        return tuple(_PATTERN_CHARS[c] for c in pattern)
    if not layers:
        return None
    interval = files.count(scope.get("full_attention_interval"), "full_attention_interval")
    if interval:
        return tuple(LINEAR if (i + 1) % interval else FULL for i in range(layers))
    model_type = scope.get("model_type")
    if model_type == "gemma2":
        return tuple(SLIDING if (i + 1) % 2 else FULL for i in range(layers))
    period = files.count(scope.get("sliding_window_pattern"), "sliding_window_pattern")
    if period and scope.get("sliding_window") is not None:
        return tuple(SLIDING if (i + 1) % period else FULL for i in range(layers))
    if model_type == "llama4_text" and scope.get("attention_chunk_size") is not None:
        return _llama4_kinds(scope, layers)
    return None


def recurrent_state(scope: Mapping[str, Any]) -> RecurrentState | None:
    """The per-layer state of linear-attention (Gated DeltaNet) or Mamba-2 layers, as vLLM shapes
    it (`MambaStateShapeCalculator.gated_delta_net_state_shape` / `mamba2_state_shape`,
    https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/model_executor/layers/mamba/mamba_utils.py#L195-L301)."""
    k_heads = files.count(scope.get("linear_num_key_heads"), "linear_num_key_heads")
    v_heads = files.count(scope.get("linear_num_value_heads"), "linear_num_value_heads")
    k_dim = files.count(scope.get("linear_key_head_dim"), "linear_key_head_dim")
    v_dim = files.count(scope.get("linear_value_head_dim"), "linear_value_head_dim")
    kernel = files.count(scope.get("linear_conv_kernel_dim"), "linear_conv_kernel_dim")
    if k_heads and v_heads and k_dim and v_dim and kernel:
        return RecurrentState(
            kind="gated_delta_net",
            conv_channels=k_dim * k_heads * 2 + v_dim * v_heads,
            conv_kernel=kernel,
            state_heads=v_heads,
            state_dims=(v_dim, k_dim),
            state_dtype=None,
        )
    heads = files.count(scope.get("mamba_num_heads"), "mamba_num_heads")
    head_dim = files.count(scope.get("mamba_head_dim"), "mamba_head_dim")
    state = files.count(scope.get("ssm_state_size"), "ssm_state_size")
    groups = files.count(scope.get("n_groups", scope.get("mamba_n_groups")), "n_groups")
    kernel = files.count(scope.get("conv_kernel", scope.get("mamba_d_conv")), "conv_kernel")
    if heads and head_dim and state and groups and kernel:
        return RecurrentState(
            kind="mamba2",
            conv_channels=heads * head_dim + 2 * groups * state,
            conv_kernel=kernel,
            state_heads=heads,
            state_dims=(head_dim, state),
            state_dtype=files.text(scope.get("mamba_ssm_cache_dtype"), "mamba_ssm_cache_dtype"),
        )
    return None


def _kind(spelling: str) -> str:
    return _KIND_SPELLINGS.get(spelling.lower(), spelling.lower())


def _llama4_kinds(scope: Mapping[str, Any], layers: int) -> tuple[str, ...]:
    """Llama 4: layers with RoPE use chunked attention, the NoPE ones (every 4th by default) full
    attention (vLLM llama4.py `use_chunked_local_attn = not self.nope and attention_chunk_size`)."""
    no_rope = scope.get("no_rope_layers")
    if isinstance(no_rope, list) and len(no_rope) == layers:
        uses_rope = [bool(v) for v in no_rope]
    else:
        interval = files.count(scope.get("no_rope_layer_interval"), "no_rope_layer_interval") or 4
        uses_rope = [(i + 1) % interval != 0 for i in range(layers)]
    return tuple(CHUNKED if rope else FULL for rope in uses_rope)
