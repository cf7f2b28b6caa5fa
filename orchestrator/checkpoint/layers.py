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

#: What each decoder layer's feed-forward block is: a dense MLP, a mixture of experts, or none
#: (a Nemotron-H Mamba or attention layer carries no MLP).
DENSE, MOE, NO_MLP = "dense", "moe", "none"
#: Nemotron-H: "M" Mamba-2 mixer only, "*" attention only, "E" MoE only, "-" MLP only (vLLM
#: `NemotronHMambaDecoderLayer` / `NemotronHAttentionDecoderLayer` / `NemotronHMoEDecoderLayer` /
#: `NemotronHMLPDecoderLayer`, https://github.com/vllm-project/vllm/blob/00b08dc44519a82cbdd9061d92d1226985094622/vllm/model_executor/models/nemotron_h.py).
_PATTERN_MLPS: Final[Mapping[str, str]] = {"M": NO_MLP, "*": NO_MLP, "-": DENSE, "E": MOE}
#: Families whose MoE layers add one shared expert of `intermediate_size` that no config key
#: declares: Llama 4 (`Llama4MoE.shared_expert`, https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/model_executor/models/llama4.py).
FIXED_SHARED_EXPERTS: Final[Mapping[str, int]] = {"llama4_text": 1}
#: Activations of a two-matrix (up, down) MLP; every other activation is gated (gate, up, down).
#: Nemotron-H's `relu2` MLP has `up_proj` and `down_proj` only (`NemotronHMLP`, same file).
UNGATED_ACTIVATIONS: Final = frozenset({"relu2", "relu_squared", "squared_relu"})


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


def mlp_kinds(scope: Mapping[str, Any], layers: int | None) -> tuple[str, ...] | None:
    """Each decoder layer's feed-forward kind (DENSE, MOE or NO_MLP), or None for a dense model
    (every layer a dense MLP). MoE layers are placed as the engines' model classes place them:

    - Nemotron-H `hybrid_override_pattern` ("E" MoE, "-" MLP, "M"/"*" none);
    - `first_k_dense_replace` dense layers first, then MoE every `moe_layer_freq`-th layer
      (DeepSeek-V2/V3, Kimi-K2, GLM-4.5+: `layer_idx >= first_k_dense_replace and layer_idx %
      moe_layer_freq == 0`, https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/model_executor/models/deepseek_v2.py);
    - MoE on every `decoder_sparse_step`-th layer except `mlp_only_layers` (Qwen2/Qwen3 MoE:
      `layer_idx not in mlp_only_layers and (layer_idx + 1) % decoder_sparse_step == 0`,
      https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/model_executor/models/qwen3_moe.py);
    - MoE on every `interleave_moe_layer_step`-th layer (Llama 4: `(layer_idx + 1) %
      interleave_moe_layer_step == 0`, so Maverick's step 2 puts experts on every other layer and
      Scout's step 1 on all, https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/model_executor/models/llama4.py).
    """
    pattern = files.text(scope.get("hybrid_override_pattern"), "hybrid_override_pattern")
    if pattern is not None:
        return tuple(_PATTERN_MLPS.get(c, DENSE) for c in pattern)
    experts = files.count(
        scope.get(
            "num_experts",
            scope.get("n_routed_experts", scope.get("num_local_experts")),
        ),
        "num_experts",
    )
    if not experts or not layers:
        return None
    first_dense = files.count(scope.get("first_k_dense_replace"), "first_k_dense_replace") or 0
    freq = scope.get("moe_layer_freq")
    freq_list = freq if isinstance(freq, list) and len(freq) == layers else None
    every = None if freq_list is not None else files.count(freq, "moe_layer_freq")
    sparse = files.count(scope.get("decoder_sparse_step"), "decoder_sparse_step")
    interleave = files.count(scope.get("interleave_moe_layer_step"), "interleave_moe_layer_step")
    only_mlp = scope.get("mlp_only_layers")
    dense_only = (
        {i for i in only_mlp if isinstance(i, int)} if isinstance(only_mlp, list) else set()
    )
    kinds = []
    for i in range(layers):
        moe = i >= first_dense and i not in dense_only
        if freq_list is not None:
            moe = moe and bool(freq_list[i])
        elif every:
            moe = moe and i % every == 0
        if sparse:
            moe = moe and (i + 1) % sparse == 0
        if interleave is not None:
            moe = moe and interleave > 0 and (i + 1) % interleave == 0
        kinds.append(MOE if moe else DENSE)
    return tuple(kinds)


def shared_expert_width(scope: Mapping[str, Any]) -> int | None:
    """The summed intermediate width of an MoE layer's shared experts, however the family spells
    it: `shared_expert_intermediate_size` (Qwen2-MoE, Qwen3-Next, Qwen3.5: one shared expert),
    `moe_shared_expert_intermediate_size` x `n_shared_experts` (Nemotron-H), `n_shared_experts`
    x `moe_intermediate_size` (DeepSeek, Kimi, GLM), or a family's fixed shared expert
    (`FIXED_SHARED_EXPERTS`). None when the layers have none."""
    shared = files.count(
        scope.get("n_shared_experts", scope.get("num_shared_experts")), "n_shared_experts"
    )
    width = files.count(
        scope.get("shared_expert_intermediate_size"), "shared_expert_intermediate_size"
    )
    if width:
        return width
    nemotron = files.count(
        scope.get("moe_shared_expert_intermediate_size"), "moe_shared_expert_intermediate_size"
    )
    if nemotron:
        return nemotron * (shared or 1)
    expert = files.count(scope.get("moe_intermediate_size"), "moe_intermediate_size")
    intermediate = files.count(scope.get("intermediate_size"), "intermediate_size")
    if shared:
        return shared * (expert or intermediate or 0) or None
    model_type = scope.get("model_type")
    fixed = FIXED_SHARED_EXPERTS.get(model_type) if isinstance(model_type, str) else None
    return fixed * intermediate if fixed and intermediate else None


def gated_mlp(scope: Mapping[str, Any]) -> bool:
    """Whether MLPs and experts have three matrices (gate, up, down) rather than two."""
    act = scope.get("mlp_hidden_act", scope.get("hidden_act", scope.get("hidden_activation")))
    return not (isinstance(act, str) and act.lower() in UNGATED_ACTIVATIONS)


def linear_mixer_params(scope: Mapping[str, Any], hidden: int | None) -> int | None:
    """Parameters of one linear-attention (Gated DeltaNet) or Mamba-2 mixer, from the shapes vLLM
    builds: Gated DeltaNet `in_proj_qkvz` H x (2 key_dim + 2 value_dim), `in_proj_ba` H x 2 v_heads,
    a conv over 2 key_dim + value_dim channels and `out_proj` value_dim x H
    (https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/model_executor/models/qwen3_next.py);
    Mamba-2 `in_proj` H x (2 I + 2 groups x state + heads), a conv over I + 2 groups x state
    channels and `out_proj` I x H with I = heads x head_dim (`MambaMixer2`,
    https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/model_executor/layers/mamba/mamba_mixer2.py)."""
    state = recurrent_state(scope)
    if state is None or not hidden:
        return None
    if state.kind == "gated_delta_net":
        v_heads, (v_dim, k_dim) = state.state_heads, state.state_dims
        k_heads = files.count(scope.get("linear_num_key_heads"), "linear_num_key_heads") or 0
        key, value = k_heads * k_dim, v_heads * v_dim
        projections = hidden * (2 * key + 2 * value) + hidden * 2 * v_heads + value * hidden
        return projections + state.conv_channels * state.conv_kernel + 2 * v_heads + v_dim
    heads, head_dim = state.state_heads, state.state_dims[0]
    inner = heads * head_dim
    groups_state = state.conv_channels - inner
    projections = hidden * (2 * inner + groups_state + heads) + inner * hidden
    return projections + state.conv_channels * state.conv_kernel + 3 * heads + inner
