"""One catalog entry, built-in or the user's: its cited facts, and the `CheckpointInfo` they give.

An entry stores the checkpoint's raw `config.json` fields (`config`), so `info_from_config` derives
the facts exactly as it does for a downloaded checkpoint, plus what a config cannot say: tokenizer
family, weight bytes, the verifier an EAGLE head was trained for, published acceptance lengths.
Every fact names its public source; facts nobody could confirm are listed in `unverified`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, cast

from orchestrator.checkpoint.eagle import eagle_head_info
from orchestrator.checkpoint.info import (
    CheckpointInfo,
    EagleGeneration,
    EagleHeadInfo,
    HeadFormat,
    TokenizerInfo,
)
from orchestrator.checkpoint.reading import _with_modelopt_quant, info_from_config

CatalogKind = Literal["built-in", "user"]
Role = Literal["target", "draft", "head"]

#: How a user-catalog entry's `CheckpointInfo.location` begins (the built-in's: "built-in catalog").
USER_LOCATION_PREFIX = "user catalog "

#: Facts an entry states outside `config`, each of which must name its source in `fact_sources`.
SOURCED_FACTS: tuple[str, ...] = ("tokenizer_family", "weight_bytes", "param_count", "verifier")


@dataclass(frozen=True)
class PublishedAcceptance:
    """A mean acceptance length (tokens per verification step, bonus token included) as it was
    published, with the settings it was measured under."""

    value: float
    dataset: str
    engine: str
    source: str
    k: int | None = None
    """Speculative tokens per step (vLLM num_speculative_tokens, SGLang num_steps)."""
    value_max: float | None = None
    """Upper end when the source gives a range."""
    settings: str | None = None
    """Anything else the number depends on (tree shape, temperature, batch size, 'a floor')."""


@dataclass(frozen=True)
class CatalogEntry:
    """A model as one catalog records it."""

    model: str
    """The hub id as the catalog spells it."""
    catalog: CatalogKind
    location: str
    """Where the entry lives: the packaged file, or the user catalog's path."""
    data: Mapping[str, Any] = field(repr=False)
    roles: tuple[Role, ...] = ()
    aliases: tuple[str, ...] = ()
    verifier: str | None = None
    """For EAGLE heads: the target the publisher trained it for (from its documentation)."""
    published_acceptance: tuple[PublishedAcceptance, ...] = ()
    sources: tuple[str, ...] = ()
    fact_sources: Mapping[str, str] = field(default_factory=dict)
    unverified: tuple[str, ...] = ()

    @property
    def config(self) -> Mapping[str, Any]:
        return cast(Mapping[str, Any], self.data.get("config") or {})


def parse_entry(
    model: str, data: Mapping[str, Any], catalog: CatalogKind, location: str
) -> CatalogEntry:
    """A catalog entry from its JSON object."""
    return CatalogEntry(
        model=model,
        catalog=catalog,
        location=location,
        data=data,
        roles=tuple(cast(Role, r) for r in data.get("roles", ())),
        aliases=tuple(str(a) for a in data.get("aliases", ())),
        verifier=_str(data.get("verifier")),
        published_acceptance=tuple(_acceptance(a) for a in data.get("published_acceptance", ())),
        sources=tuple(str(s) for s in data.get("sources", ())),
        fact_sources={str(k): str(v) for k, v in _mapping(data.get("fact_sources")).items()},
        unverified=tuple(str(u) for u in data.get("unverified", ())),
    )


def entry_info(entry: CatalogEntry, ref: str) -> CheckpointInfo:
    """The facts of `entry` as the profile names it (`ref`)."""
    data = entry.data
    config = entry.config
    info = info_from_config(
        config,
        ref=ref,
        source="catalog",
        location=_location(entry),
        revision=_str(data.get("revision")),
    )
    hf_quant = data.get("hf_quant_config")
    info = _with_modelopt_quant(info, dict(hf_quant) if isinstance(hf_quant, Mapping) else None)
    return replace(
        info,
        eagle=_eagle(config, data.get("eagle")),
        tokenizer=_tokenizer(data.get("tokenizer")),
        tokenizer_family=_str(data.get("tokenizer_family")),
        weight_bytes=_int(data.get("weight_bytes")),
        param_count=_int(data.get("param_count")),
        mtp_tensor_count=_int(data.get("mtp_tensor_count")),
        unverified=entry.unverified,
        sources=entry.sources,
        missing=tuple(str(m) for m in data.get("missing", _NOT_SHIPPED)),
    )


# The built-in catalog ships no tokenizer or weight files; a user entry records what it lacked.
_NOT_SHIPPED = ("tokenizer.json", "model.safetensors.index.json")


def _location(entry: CatalogEntry) -> str:
    if entry.catalog == "user":
        origin = _str(entry.data.get("added_from")) or "unknown origin"
        return f"{USER_LOCATION_PREFIX}{entry.location} (recorded from {origin})"
    first = entry.sources[0] if entry.sources else "no source"
    return f"built-in catalog {entry.location}: {entry.model} ({first})"


def _eagle(config: Mapping[str, Any], override: Any) -> EagleHeadInfo | None:
    """A head whose config is missing or does not show its generation carries it explicitly, as
    its publisher documents it (`eagle.generation`, `eagle.format`); a recorded user head carries
    every fact, including those only its weights showed (`has_d2t`)."""
    head = eagle_head_info(config, None)
    if not isinstance(override, Mapping):
        return head
    generation = cast(EagleGeneration, override.get("generation") or (head and head.generation))
    head_format = cast(HeadFormat, override.get("format") or (head and head.format) or "raw")
    has_d2t = override.get("has_d2t")
    if head is None:
        hidden = _int(config.get("hidden_size"))
        aux = override.get("aux_layer_ids")
        return EagleHeadInfo(
            generation=generation,
            format=head_format,
            hidden_size=hidden,
            target_hidden_size=_int(config.get("target_hidden_size")) or hidden,
            vocab_size=_int(config.get("vocab_size")),
            draft_vocab_size=_int(config.get("draft_vocab_size")),
            has_d2t=has_d2t if isinstance(has_d2t, bool) else None,
            aux_layer_ids=tuple(aux) if isinstance(aux, list) else None,
        )
    return replace(
        head,
        generation=generation,
        format=head_format,
        has_d2t=has_d2t if isinstance(has_d2t, bool) else head.has_d2t,
    )


def _tokenizer(value: Any) -> TokenizerInfo | None:
    if not isinstance(value, Mapping) or not isinstance(value.get("fingerprint"), str):
        return None
    return TokenizerInfo(
        fingerprint=str(value["fingerprint"]),
        vocab_len=int(value.get("vocab_len") or 0),
        bos_token=_str(value.get("bos_token")),
        eos_token=_str(value.get("eos_token")),
        source_file=_str(value.get("source_file")) or "tokenizer.json",
        vocab_fingerprint=_str(value.get("vocab_fingerprint")),
    )


def _acceptance(value: Any) -> PublishedAcceptance:
    data = _mapping(value)
    return PublishedAcceptance(
        value=float(data["value"]),
        dataset=str(data.get("dataset", "")),
        engine=str(data.get("engine", "")),
        source=str(data.get("source", "")),
        k=_int(data.get("k")),
        value_max=float(data["value_max"]) if data.get("value_max") is not None else None,
        settings=_str(data.get("settings")),
    )


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
