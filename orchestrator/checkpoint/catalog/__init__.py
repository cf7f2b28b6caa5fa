"""The built-in catalog: cited config facts of popular models, the last resort of resolution.

Data lives beside this module: `models/<family>.json` (one file per model family, each entry keyed
by its hub id) and `tokenizers.json`. Nothing is read until resolution reaches the catalog. Tokenizer
files are not shipped, so each model names a documented tokenizer family instead
(`tokenizer_families`), and rules that compare tokenizers say when they compared families rather
than file content. The user's own catalog (`catalog.user`) ranks above this one.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

from orchestrator.checkpoint.catalog.entries import (
    USER_LOCATION_PREFIX,
    CatalogEntry,
    CatalogKind,
    entry_info,
    parse_entry,
)
from orchestrator.checkpoint.info import CheckpointInfo
from orchestrator.checkpoint.names import normalise_model_name
from orchestrator.datafiles import package_file

__all__ = [
    "CatalogEntry",
    "TokenizerFamily",
    "answering_catalog",
    "catalog_entries",
    "catalog_entry",
    "catalog_info",
    "catalog_models",
    "tokenizer_family",
]


@dataclass(frozen=True)
class TokenizerFamily:
    """A tokenizer shared by several models, as a public source documents it."""

    id: str
    vocab_len: int | None
    extends: str | None
    """A family this one adds tokens to (same ids for the shared part), e.g. qwen3 -> qwen2.5."""
    source: str


def catalog_info(model: str) -> CheckpointInfo | None:
    """The built-in catalog's facts about `model` (hub id or alias, case-insensitive), or None."""
    entry = catalog_entry(model)
    return with_verifier_width(entry_info(entry, model), entry) if entry is not None else None


def with_verifier_width(info: CheckpointInfo, entry: CatalogEntry) -> CheckpointInfo:
    """An EAGLE head whose config does not give the hidden size it reads gets its verifier's:
    the head was trained on that model's hidden states (the catalog records the verifier from
    the publisher's documentation). A verifier named by a quantized checkpoint the catalog lacks
    reads the width of the model it quantizes (quantization keeps the hidden size). Every head of
    the built-in catalog gains a checkable width this way, so a head for another model no longer
    passes with only an info."""
    head = info.eagle
    if head is None or head.target_hidden_size is not None or not entry.verifier:
        return info
    verifier = catalog_entry(entry.verifier) or _unquantized_entry(entry.verifier)
    if verifier is None or verifier.model.lower() == entry.model.lower():
        return info
    width = entry_info(verifier, verifier.model).hidden_size
    if width is None:
        return info
    head = replace(head, target_hidden_size=width, target_hidden_size_from=verifier.model)
    return replace(info, eagle=head)


def _unquantized_entry(model: str) -> CatalogEntry | None:
    """The entry of the model that `model` (a quantized checkpoint's name) quantizes: the same
    organisation and name once the quantizer's suffix is removed, e.g. Qwen/Qwen3-Next-80B-A3B-
    Instruct for Qwen/Qwen3-Next-80B-A3B-Instruct-FP8. None when the name has no such suffix."""
    org, name = normalise_model_name(model)
    if org is None or f"{org}/{name}" == model.lower():
        return None
    return catalog_entry(f"{org}/{name}")


def answering_catalog(info: CheckpointInfo) -> CatalogKind | None:
    """Which catalog `info` came from ("user" or "built-in"), or None when it was read from files."""
    if info.source != "catalog":
        return None
    return "user" if info.location.startswith(USER_LOCATION_PREFIX) else "built-in"


def catalog_entry(model: str) -> CatalogEntry | None:
    """The built-in catalog's entry for `model` (hub id or alias, case-insensitive), or None.
    The family files whose name the id contains are read first (`validate` of a Qwen3 pair reads
    qwen3.json only); every file is read when they do not hold it."""
    wanted = model.lower()
    for path in _family_files(wanted):
        found = _file_index(path).get(wanted)
        if found is not None:
            return _parse(*found)
    found = _index().get(wanted)
    return _parse(*found) if found is not None else None


def catalog_entries() -> tuple[CatalogEntry, ...]:
    """Every entry of the built-in catalog, in file order."""
    return tuple(_parse(*raw) for raw in _raw_entries())


def catalog_models() -> tuple[str, ...]:
    """Every model id in the built-in catalog, as spelt on the hub."""
    return tuple(model for model, _, _ in _raw_entries())


def tokenizer_family(family_id: str) -> TokenizerFamily | None:
    """A documented tokenizer family by id."""
    data = _tokenizer_families().get(family_id)
    if data is None:
        return None
    return TokenizerFamily(family_id, data.get("vocab_len"), data.get("extends"), data["source"])


RawEntry = tuple[str, dict[str, Any], str]
"""(hub id, the entry's JSON object, the file it is in); parsed only when asked for."""


def _parse(model: str, data: dict[str, Any], location: str) -> CatalogEntry:
    return parse_entry(model, data, "built-in", location)


@functools.cache
def _index() -> dict[str, RawEntry]:
    index: dict[str, RawEntry] = {}
    for raw in _raw_entries():
        for name in (raw[0], *raw[1].get("aliases", ())):
            index.setdefault(str(name).lower(), raw)
    return index


@functools.cache
def _raw_entries() -> tuple[RawEntry, ...]:
    entries: list[RawEntry] = []
    for path in _model_files():
        entries.extend(_file_entries(path))
    return tuple(entries)


@functools.cache
def _model_files() -> tuple[Path, ...]:
    return tuple(sorted(package_file(__name__, "models").glob("*.json")))


def _family_files(model: str) -> list[Path]:
    """The model files whose family name (file stem) `model` contains, most specific first."""
    name = model.rsplit("/", 1)[-1]
    matching = [path for path in _model_files() if path.stem in name]
    return sorted(matching, key=lambda path: -len(path.stem))


@functools.cache
def _file_entries(path: Path) -> tuple[RawEntry, ...]:
    document = cast(dict[str, Any], json.loads(path.read_text("utf-8")))
    location = f"models/{path.name}"
    models = cast(dict[str, dict[str, Any]], document["models"])
    return tuple((model, data, location) for model, data in models.items())


@functools.cache
def _file_index(path: Path) -> dict[str, RawEntry]:
    index: dict[str, RawEntry] = {}
    for raw in _file_entries(path):
        for name in (raw[0], *raw[1].get("aliases", ())):
            index.setdefault(str(name).lower(), raw)
    return index


@functools.cache
def _tokenizer_families() -> dict[str, dict[str, Any]]:
    text = package_file(__name__, "tokenizers.json").read_text("utf-8")
    return cast(dict[str, dict[str, Any]], json.loads(text)["tokenizer_families"])
