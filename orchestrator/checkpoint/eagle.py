"""Recognise EAGLE-1/2 and EAGLE-3 draft heads from `config.json` fields and tensor names only.

Signals, strongest first (shared/reference/catalog.md §B2/§B4): the speculators discriminator
`speculators_model_type`; the head `architectures` (`*Eagle3*` vs `*Eagle*`); EAGLE-3-only keys
(`draft_vocab_size`, aux layer ids, `eagle_config`); `d2t`/`t2d` buffers (EAGLE-3) or a bare `fc`
projection (EAGLE-1) in the weight index; and finally a one-layer Llama config, which is how raw
EAGLE-1 heads (yuhuili/EAGLE-*) are written. Never the repository name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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
    """The head facts, or None when nothing marks the checkpoint as an EAGLE head."""
    kind = _generation_and_format(config, tensor_names)
    if kind is None:
        return None
    generation, head_format = kind
    layer = _mapping(config.get("transformer_layer_config")) or config
    hidden = _int(layer.get("hidden_size"))
    verifier = _mapping(_mapping(config.get("speculators_config")).get("verifier"))
    return EagleHeadInfo(
        generation=generation,
        format=head_format,
        hidden_size=hidden,
        target_hidden_size=_int(config.get("target_hidden_size")) or hidden,
        vocab_size=_int(layer.get("vocab_size")) or _int(config.get("vocab_size")),
        draft_vocab_size=_int(config.get("draft_vocab_size")),
        has_d2t=None if tensor_names is None else "d2t" in tensor_names,
        aux_layer_ids=_aux_layer_ids(config),
        verifier_name=_str(verifier.get("name_or_path")),
        verifier_architectures=tuple(str(a) for a in verifier.get("architectures") or ()),
    )


def _generation_and_format(
    config: Mapping[str, Any], names: tuple[str, ...] | None
) -> tuple[EagleGeneration, HeadFormat] | None:
    speculators_type = config.get("speculators_model_type")
    if isinstance(speculators_type, str):
        generation = _SPECULATORS_GENERATION.get(speculators_type)
        return (generation, "speculators") if generation else None
    architectures = [str(a) for a in config.get("architectures") or ()]
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
    for scope in (config, _mapping(config.get("eagle_config"))):
        ids = scope.get("eagle_aux_hidden_state_layer_ids")
        if isinstance(ids, list) and all(isinstance(i, int) for i in ids):
            return tuple(ids)
    return None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
