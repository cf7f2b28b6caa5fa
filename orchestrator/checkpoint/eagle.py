"""Recognise EAGLE-1/2 and EAGLE-3 draft heads from `config.json` fields and tensor names only.

Signals, strongest first: the speculators discriminator
`speculators_model_type`; the head `architectures` (`*Eagle3*` vs `*Eagle*`); EAGLE-3-only keys
(`draft_vocab_size`, aux layer ids, `eagle_config`); `d2t`/`t2d` buffers (EAGLE-3) or a bare `fc`
projection (EAGLE-1) in the weight index; and finally a one-layer Llama config, which is how raw
EAGLE-1 heads (yuhuili/EAGLE-*) are written. Never the repository name. The formats:
https://github.com/vllm-project/speculators/blob/v0.7.0/src/speculators/config.py (speculators),
https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/model_executor/models/llama_eagle3.py and
llama_eagle.py beside it (how vLLM reads EAGLE-3 and EAGLE-1 heads).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.checkpoint import files
from orchestrator.checkpoint.info import EagleGeneration, EagleHeadInfo, HeadFormat

_SPECULATORS_GENERATION: dict[str, EagleGeneration] = {
    "eagle3": "eagle3",
    "peagle": "eagle3",  # parallel-drafting EAGLE-3 (vLLM maps it to eagle3)
    "eagle": "eagle1",
}
_EAGLE3_KEYS = ("draft_vocab_size", "eagle_aux_hidden_state_layer_ids", "eagle_config")


def eagle_head_info(
    config: Mapping[str, Any], tensor_names: tuple[str, ...] | None
) -> EagleHeadInfo | None:
    """The head facts, or None when nothing marks the checkpoint as an EAGLE head. Raises
    `files.BadValue` naming the key when a value it reads has the wrong type or range."""
    kind = _generation_and_format(config, tensor_names)
    if kind is None:
        return None
    generation, head_format = kind
    layer_key = "transformer_layer_config"
    layer = files.mapping(config.get(layer_key), layer_key)
    prefix = f"{layer_key}." if layer else ""
    layer = layer or config
    hidden = files.count(layer.get("hidden_size"), f"{prefix}hidden_size")
    speculators = files.mapping(config.get("speculators_config"), "speculators_config")
    verifier = files.mapping(speculators.get("verifier"), "speculators_config.verifier")
    return EagleHeadInfo(
        generation=generation,
        format=head_format,
        hidden_size=hidden,
        target_hidden_size=files.count(config.get("target_hidden_size"), "target_hidden_size")
        or hidden,
        vocab_size=files.count(layer.get("vocab_size"), f"{prefix}vocab_size")
        or files.count(config.get("vocab_size"), "vocab_size"),
        draft_vocab_size=files.count(config.get("draft_vocab_size"), "draft_vocab_size"),
        has_d2t=None if tensor_names is None else "d2t" in tensor_names,
        aux_layer_ids=_aux_layer_ids(config),
        verifier_name=files.text(
            verifier.get("name_or_path"), "speculators_config.verifier.name_or_path"
        ),
        verifier_architectures=files.strings(
            verifier.get("architectures"), "speculators_config.verifier.architectures"
        ),
    )


def _generation_and_format(
    config: Mapping[str, Any], names: tuple[str, ...] | None
) -> tuple[EagleGeneration, HeadFormat] | None:
    speculators_type = config.get("speculators_model_type")
    if isinstance(speculators_type, str):
        generation = _SPECULATORS_GENERATION.get(speculators_type)
        return (generation, "speculators") if generation else None
    architectures = files.strings(config.get("architectures"), "architectures")
    if any("Eagle3" in a for a in architectures):
        if "LlamaForCausalLMEagle3" in architectures:
            return "eagle3", "specforge"
        speculators = {"Eagle3Speculator", "Eagle3DraftModel"} & set(architectures)
        return "eagle3", "speculators" if speculators else "raw"
    if any("Eagle" in a for a in architectures):
        return "eagle1", "raw"
    if any(key in config for key in _EAGLE3_KEYS):
        return "eagle3", "modelopt" if "eagle_config" in config else "raw"
    return _from_tensors_or_shape(config, names)


def _from_tensors_or_shape(
    config: Mapping[str, Any], names: tuple[str, ...] | None
) -> tuple[EagleGeneration, HeadFormat] | None:
    if names is not None:
        if "d2t" in names or "t2d" in names:
            return "eagle3", "raw"
        if "fc.weight" in names:
            return "eagle1", "raw"
        return None
    if config.get("num_hidden_layers") == 1 and config.get("model_type") == "llama":
        return "eagle1", "raw"
    return None


def _aux_layer_ids(config: Mapping[str, Any]) -> tuple[int, ...] | None:
    key = "eagle_aux_hidden_state_layer_ids"
    for prefix, scope in (("", config), ("eagle_config.", _eagle_config(config))):
        ids = scope.get(key)
        if ids is None:
            continue
        if not isinstance(ids, list):
            raise files.BadValue(prefix + key, f"is {files.describe(ids)}, not a list of layer ids")
        return tuple(files.count(i, f"{prefix}{key}[{n}]") or 0 for n, i in enumerate(ids))
    return None


def _eagle_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    return files.mapping(config.get("eagle_config"), "eagle_config")
