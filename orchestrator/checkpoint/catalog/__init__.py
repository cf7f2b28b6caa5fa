"""The built-in catalog: cited config facts of popular models, the last resort of resolution.

Data lives in `models.json` beside this module. Tokenizer files are not shipped, so each model
names a documented tokenizer family instead (`tokenizer_families`), and rules that compare
tokenizers say when they compared families rather than file content.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, replace
from typing import Any, cast

from orchestrator.checkpoint.eagle import eagle_head_info
from orchestrator.checkpoint.info import (
    CheckpointInfo,
    EagleGeneration,
    EagleHeadInfo,
    HeadFormat,
)
from orchestrator.checkpoint.reading import info_from_config
from orchestrator.datafiles import package_file


@dataclass(frozen=True)
class TokenizerFamily:
    """A tokenizer shared by several models, as the reference documents it."""

    id: str
    vocab_len: int | None
    extends: str | None
    """A family this one adds tokens to (same ids for the shared part), e.g. qwen3 -> qwen2.5."""
    source: str


def catalog_info(model: str) -> CheckpointInfo | None:
    """The catalog's facts about `model` (hub id, case-insensitive), or None."""
    entry = _models().get(model.lower())
    if entry is None:
        return None
    name, data = entry
    sources = tuple(str(s) for s in data.get("sources", ()))
    config = cast(dict[str, Any], data.get("config", {}))
    info = info_from_config(
        config,
        ref=model,
        source="catalog",
        location=f"built-in catalog entry {name} ({sources[0] if sources else 'no source'})",
        revision=None,
    )
    return replace(
        info,
        eagle=_eagle(config, data.get("eagle")),
        tokenizer_family=data.get("tokenizer_family"),
        weight_bytes=data.get("weight_bytes"),
        param_count=data.get("param_count"),
        unverified=tuple(data.get("unverified", ())),
        sources=sources,
        missing=("tokenizer.json", "model.safetensors.index.json"),
    )


def tokenizer_family(family_id: str) -> TokenizerFamily | None:
    """A documented tokenizer family by id."""
    data = _document()["tokenizer_families"].get(family_id)
    if data is None:
        return None
    return TokenizerFamily(family_id, data.get("vocab_len"), data.get("extends"), data["source"])


def catalog_models() -> tuple[str, ...]:
    """Every model id in the catalog, as spelt on the hub."""
    return tuple(name for name, _ in _models().values())


def _eagle(config: dict[str, Any], override: Any) -> EagleHeadInfo | None:
    """Heads whose config the reference could not read carry their generation explicitly."""
    head = eagle_head_info(config, None)
    if not isinstance(override, dict):
        return head
    generation = cast(EagleGeneration, override["generation"])
    head_format = cast(HeadFormat, override.get("format", "raw"))
    if head is None:
        hidden = config.get("hidden_size")
        return EagleHeadInfo(
            generation=generation,
            format=head_format,
            hidden_size=hidden,
            target_hidden_size=config.get("target_hidden_size") or hidden,
            vocab_size=config.get("vocab_size"),
            draft_vocab_size=config.get("draft_vocab_size"),
            has_d2t=override.get("has_d2t"),
            aux_layer_ids=None,
        )
    return replace(head, generation=generation, format=head_format, has_d2t=override.get("has_d2t"))


@functools.cache
def _models() -> dict[str, tuple[str, dict[str, Any]]]:
    models = cast(dict[str, dict[str, Any]], _document()["models"])
    return {name.lower(): (name, data) for name, data in models.items()}


@functools.cache
def _document() -> dict[str, Any]:
    text = package_file(__name__, "models.json").read_text("utf-8")
    return cast(dict[str, Any], json.loads(text))
