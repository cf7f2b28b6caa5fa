"""Read a directory of checkpoint metadata files into a `CheckpointInfo`. Pure: files in, facts out.

Parsing `config.json` is kept apart from judging it: this module owns the alias table for field
names that differ between model families (as vLLM's `getattr_iter` and Kaito's `get_config_attr`
do) and the nested `text_config` of multimodal wrappers; rules read only typed attributes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

from orchestrator.checkpoint import files
from orchestrator.checkpoint.eagle import eagle_head_info
from orchestrator.checkpoint.files import BadValue, read_json_object
from orchestrator.checkpoint.info import CheckpointInfo, CheckpointSource
from orchestrator.checkpoint.layers import (
    gated_mlp,
    layer_kinds,
    linear_mixer_params,
    mlp_kinds,
    recurrent_state,
    shared_expert_width,
    with_class_defaults,
)
from orchestrator.checkpoint.tokenizer import read_tokenizer
from orchestrator.checkpoint.weights import INDEX_FILE, count_mtp_tensors, read_weight_facts

#: Every file specdeploy reads from a checkpoint; none of them holds weights.
METADATA_FILES: Final = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.json",
    INDEX_FILE,
    "hf_quant_config.json",
)

#: CheckpointInfo field -> config.json keys that carry it, first match wins.
FIELD_ALIASES: Final[Mapping[str, tuple[str, ...]]] = {
    "hidden_size": ("hidden_size", "n_embd", "d_model"),
    "num_hidden_layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    "num_attention_heads": ("num_attention_heads", "n_head", "num_heads", "n_heads"),
    "num_key_value_heads": ("num_key_value_heads", "num_kv_heads", "n_head_kv", "n_kv_heads"),
    "head_dim": ("head_dim",),
    "intermediate_size": ("intermediate_size", "ffn_hidden_size", "n_inner"),
    "vocab_size": ("vocab_size", "padded_vocab_size"),
    "max_position_embeddings": ("max_position_embeddings", "n_positions", "max_seq_len"),
    "num_experts": ("num_experts", "n_routed_experts", "num_local_experts", "moe_num_experts"),
    "num_experts_per_tok": ("num_experts_per_tok", "experts_per_token", "moe_top_k"),
    "moe_intermediate_size": ("moe_intermediate_size",),
    "num_shared_experts": ("n_shared_experts", "num_shared_experts"),
    "first_k_dense_replace": ("first_k_dense_replace",),
    "dense_intermediate_size": ("intermediate_size_mlp",),
    "moe_latent_size": ("moe_latent_size",),
    "kv_lora_rank": ("kv_lora_rank",),
    "q_lora_rank": ("q_lora_rank",),
    "qk_rope_head_dim": ("qk_rope_head_dim",),
    "qk_nope_head_dim": ("qk_nope_head_dim",),
    "v_head_dim": ("v_head_dim",),
    "sliding_window": ("sliding_window",),
    "attention_chunk_size": ("attention_chunk_size",),
}

#: Keys that declare MTP layers, by family (DeepSeek/MiMo/GLM/Qwen3-Next use
#: num_nextn_predict_layers, Qwen3.5 mtp_num_hidden_layers, MiniMax-M3 num_mtp_modules: vLLM's
#: hf_config_override, https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/config/speculative.py#L661-L1074).
MTP_KEYS: Final = ("num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_modules")

# Quantization methods whose bit width is implied by the name.
_QUANT_BITS: Final[Mapping[str, float]] = {
    "fp8": 8,
    "fbgemm_fp8": 8,
    "mxfp4": 4,
    "nvfp4": 4,
    "modelopt_fp4": 4,
    "bitsandbytes_4bit": 4,
}


def read_checkpoint_dir(
    path: Path, *, ref: str, source: CheckpointSource, location: str, revision: str | None
) -> CheckpointInfo:
    """Read every metadata file present in `path`; absent files are listed in `missing`.
    Raises `UnreadableMetadata` when a file is present but unusable (a value of the wrong type,
    not finite, negative or absurdly large; not JSON; too large; not a regular file)."""
    config = read_json_object(path / "config.json")
    tokenizer = read_tokenizer(path)
    weights = read_weight_facts(path)
    try:
        info = info_from_config(
            config or {}, ref=ref, source=source, location=location, revision=revision
        )
        eagle = eagle_head_info(config or {}, weights.tensor_names if weights else None)
    except BadValue as exc:
        raise exc.in_file(path / "config.json") from None
    missing = [
        name
        for name, absent in (
            ("config.json", config is None),
            ("tokenizer.json", tokenizer is None),
            (f"{INDEX_FILE} or *.safetensors", weights is None),
        )
        if absent
    ]
    info = replace(
        info,
        tokenizer=tokenizer,
        weight_bytes=weights.weight_bytes if weights else None,
        param_count=weights.param_count if weights else None,
        mtp_tensor_count=(
            count_mtp_tensors(weights.tensor_names, info.num_hidden_layers) if weights else None
        ),
        eagle=eagle,
        missing=tuple(missing),
    )
    quant_file = path / "hf_quant_config.json"
    try:
        return _with_modelopt_quant(info, read_json_object(quant_file))
    except BadValue as exc:
        raise exc.in_file(quant_file) from None


def info_from_config(
    config: Mapping[str, Any],
    *,
    ref: str,
    source: CheckpointSource,
    location: str,
    revision: str | None,
) -> CheckpointInfo:
    """The facts `config.json` alone gives (no tokenizer, weights or head analysis). Raises
    `BadValue` naming the key when a value it reads has the wrong type or range."""
    text = _text_config(config)
    rope = files.mapping(text.get("rope_scaling"), "rope_scaling")
    quant = files.mapping(config.get("quantization_config"), "quantization_config")
    auto_map = files.mapping(config.get("auto_map"), "auto_map")
    info = CheckpointInfo(
        ref=ref,
        source=source,
        location=location,
        revision=revision,
        architectures=files.strings(config.get("architectures"), "architectures"),
        model_type=files.text(config.get("model_type"), "model_type"),
        rope_scaling_factor=files.number(rope.get("factor"), "rope_scaling.factor"),
        original_max_position_embeddings=files.count(
            rope.get("original_max_position_embeddings"),
            "rope_scaling.original_max_position_embeddings",
        ),
        rope_type=_text(rope, ("rope_type", "type"), "rope_scaling."),
        torch_dtype=_text(text, ("torch_dtype", "dtype")),
        tie_word_embeddings=files.flag(
            _first(text, ("tie_word_embeddings",), config)[1], "tie_word_embeddings"
        ),
        layer_types=layer_kinds(text, _count(text, FIELD_ALIASES["num_hidden_layers"])),
        recurrent_state=recurrent_state(text),
        mlp_types=mlp_kinds(text, _count(text, FIELD_ALIASES["num_hidden_layers"])),
        shared_expert_intermediate_size=shared_expert_width(text),
        gated_mlp=gated_mlp(text),
        linear_mixer_params=linear_mixer_params(text, _count(text, FIELD_ALIASES["hidden_size"])),
        vision_params=vision_param_count(config.get("vision_config"), text),
        mtp_layers=mtp_layer_count(config),
        quant_method=files.text(quant.get("quant_method"), "quantization_config.quant_method"),
        quant_bits=_quant_bits(quant),
        custom_code=tuple(f"{k}={v}" for k, v in sorted(auto_map.items())),
    )
    # Aliased integer fields (hidden_size, heads, MoE, MLA, ...), one lookup each.
    aliased: dict[str, Any] = {name: _count(text, keys) for name, keys in FIELD_ALIASES.items()}
    return replace(info, **aliased)


def mtp_layer_count(config: Mapping[str, Any]) -> int:
    """MTP layers the config declares, looking in the top level, `text_config` and
    `mtp_config` (Inkling), 0 when none is declared."""
    for scope in (config, _text_config(config), config.get("mtp_config")):
        if isinstance(scope, Mapping):
            value = _count(scope, MTP_KEYS)
            if value is not None:
                return value
    return 0


def _text_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """Multimodal wrappers keep the language model's fields in `text_config`; speculators-format
    heads keep the draft layer's in `transformer_layer_config`. Keys the file omits because they
    equal the config class's defaults are filled in from them (`layers.CLASS_DEFAULTS`)."""
    for key in ("text_config", "transformer_layer_config"):
        nested = config.get(key)
        if isinstance(nested, Mapping):
            return with_class_defaults({**config, **nested})
    return with_class_defaults(config)


def vision_param_count(vision: Any, text: Mapping[str, Any]) -> int | None:
    """Parameters of a ViT-style vision tower (SigLIP, CLIP, Qwen-VL, Pixtral) and its projector:
    per layer attention 4·h² and MLP 2·h·I, plus a projection into the language model's hidden
    size. An estimate from `vision_config` (gated MLPs and patch embeddings add a few percent);
    used only when no weight index gives the checkpoint's exact size."""
    if not isinstance(vision, Mapping):
        return None
    layers = _count(vision, ("num_hidden_layers", "depth", "num_layers"))
    hidden = _count(vision, ("hidden_size", "embed_dim", "width"))
    if not (layers and hidden):
        return None
    ratio = files.number(vision.get("mlp_ratio"), "vision_config.mlp_ratio") or 4.0
    intermediate = _count(vision, ("intermediate_size",)) or int(hidden * ratio)
    text_hidden = _count(text, FIELD_ALIASES["hidden_size"]) or 0
    return layers * (4 * hidden * hidden + 2 * hidden * intermediate) + hidden * text_hidden


def _first(
    config: Mapping[str, Any], keys: tuple[str, ...], *more: Mapping[str, Any]
) -> tuple[str, Any]:
    """(key, value) of the first of `keys` set in `config` (then in `more`); (keys[0], None)."""
    for scope in (config, *more):
        for key in keys:
            if scope.get(key) is not None:
                return key, scope[key]
    return keys[0], None


def _count(scope: Mapping[str, Any], keys: tuple[str, ...]) -> int | None:
    key, value = _first(scope, keys)
    return files.count(value, key)


def _text(scope: Mapping[str, Any], keys: tuple[str, ...], prefix: str = "") -> str | None:
    key, value = _first(scope, keys)
    return files.text(value, prefix + key)


def _quant_bits(quant: Mapping[str, Any]) -> float | None:
    for key in ("bits", "weight_bits", "w_bit"):
        bits = files.number(quant.get(key), f"quantization_config.{key}")
        if bits is not None:
            return bits
    method = (
        files.text(quant.get("quant_method"), "quantization_config.quant_method") or ""
    ).lower()
    bits = _QUANT_BITS.get(method)
    return float(bits) if bits is not None else None


def _with_modelopt_quant(info: CheckpointInfo, hf_quant: dict[str, Any] | None) -> CheckpointInfo:
    """NVIDIA ModelOpt checkpoints describe quantization in hf_quant_config.json instead."""
    if info.quant_method is not None or hf_quant is None:
        return info
    section = files.mapping(hf_quant.get("quantization"), "quantization")
    algo = files.text(section.get("quant_algo"), "quantization.quant_algo")
    if algo is None:
        return info
    method = algo.lower()
    return replace(info, quant_method=method, quant_bits=_QUANT_BITS.get(method))
