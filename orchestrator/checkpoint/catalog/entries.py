"""One catalog entry, built-in or the user's: its cited facts, and the `CheckpointInfo` they give.

An entry stores the checkpoint's raw `config.json` fields (`config`), so `info_from_config` derives
the facts exactly as it does for a downloaded checkpoint, plus what a config cannot say: tokenizer
family, weight bytes, the verifier an EAGLE head was trained for, published acceptance lengths.
Every fact names its public source; facts nobody could confirm are listed in `unverified`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, cast, get_args

from orchestrator.checkpoint import files
from orchestrator.checkpoint.eagle import eagle_head_info
from orchestrator.checkpoint.files import BadValue
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
SOURCED_FACTS: tuple[str, ...] = (
    "tokenizer_family",
    "weight_bytes",
    "param_count",
    "published_param_count",
    "verifier",
)


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
    """A catalog entry from its JSON object. Raises `BadValue` naming the key when a value has
    the wrong type (a user catalog is edited by hand; `entry_info` checks the rest)."""
    files.mapping(data.get("config"), "config")
    roles = files.strings(data.get("roles"), "roles")
    unknown = [r for r in roles if r not in _ROLES]
    if unknown:
        raise BadValue("roles", f"holds {unknown[0]!r}, not one of {', '.join(_ROLES)}")
    acceptance = data.get("published_acceptance")
    if acceptance is not None and not isinstance(acceptance, list):
        raise BadValue("published_acceptance", f"is {files.describe(acceptance)}, not a list")
    fact_sources = files.mapping(data.get("fact_sources"), "fact_sources")
    return CatalogEntry(
        model=model,
        catalog=catalog,
        location=location,
        data=data,
        roles=tuple(cast(Role, r) for r in roles),
        aliases=files.strings(data.get("aliases"), "aliases"),
        verifier=files.text(data.get("verifier"), "verifier"),
        published_acceptance=tuple(
            _acceptance(a, f"published_acceptance[{i}]") for i, a in enumerate(acceptance or ())
        ),
        sources=files.strings(data.get("sources"), "sources"),
        fact_sources={k: files.text(v, f"fact_sources.{k}") or "" for k, v in fact_sources.items()},
        unverified=files.strings(data.get("unverified"), "unverified"),
    )


_ROLES: tuple[Role, ...] = get_args(Role)


def entry_info(entry: CatalogEntry, ref: str) -> CheckpointInfo:
    """The facts of `entry` as the profile names it (`ref`). Raises `BadValue` naming the key
    when a value has the wrong type or range (`num_hidden_layers: 1e26`)."""
    data = entry.data
    config = entry.config
    info = info_from_config(
        config,
        ref=ref,
        source="catalog",
        location=_location(entry),
        revision=files.text(data.get("revision"), "revision"),
    )
    hf_quant = files.mapping(data.get("hf_quant_config"), "hf_quant_config")
    has_quant = isinstance(data.get("hf_quant_config"), Mapping)
    info = _with_modelopt_quant(info, dict(hf_quant) if has_quant else None)
    missing = data.get("missing")
    return replace(
        info,
        eagle=_eagle(config, files.mapping(data.get("eagle"), "eagle") or None),
        tokenizer=_tokenizer(files.mapping(data.get("tokenizer"), "tokenizer")),
        tokenizer_family=files.text(data.get("tokenizer_family"), "tokenizer_family"),
        weight_bytes=files.count(data.get("weight_bytes"), "weight_bytes"),
        param_count=files.count(data.get("param_count"), "param_count"),
        published_param_count=files.count(
            data.get("published_param_count"), "published_param_count"
        ),
        mtp_tensor_count=files.count(data.get("mtp_tensor_count"), "mtp_tensor_count"),
        unverified=entry.unverified,
        sources=entry.sources,
        missing=_NOT_SHIPPED if missing is None else files.strings(missing, "missing"),
    )


# The built-in catalog ships no tokenizer or weight files; a user entry records what it lacked.
_NOT_SHIPPED = ("tokenizer.json", "model.safetensors.index.json")


def _location(entry: CatalogEntry) -> str:
    if entry.catalog == "user":
        added_from = entry.data.get("added_from")
        origin = added_from if isinstance(added_from, str) and added_from else "unknown origin"
        return f"{USER_LOCATION_PREFIX}{entry.location} (recorded from {origin})"
    first = entry.sources[0] if entry.sources else "no source"
    return f"built-in catalog {entry.location}: {entry.model} ({first})"


def _eagle(config: Mapping[str, Any], override: Mapping[str, Any] | None) -> EagleHeadInfo | None:
    """A head whose config is missing or does not show its generation carries it explicitly, as
    its publisher documents it (`eagle.generation`, `eagle.format`); a recorded user head carries
    every fact, including those only its weights showed (`has_d2t`)."""
    head = eagle_head_info(config, None)
    if override is None:
        return head
    generation = _choice(override, "generation", get_args(EagleGeneration))
    head_format = _choice(override, "format", get_args(HeadFormat))
    has_d2t = files.flag(override.get("has_d2t"), "eagle.has_d2t")
    if head is None:
        hidden = files.count(config.get("hidden_size"), "config.hidden_size")
        aux = override.get("aux_layer_ids")
        if aux is not None and not isinstance(aux, list):
            raise BadValue("eagle.aux_layer_ids", f"is {files.describe(aux)}, not a list")
        return EagleHeadInfo(
            generation=cast(EagleGeneration, generation),
            format=cast(HeadFormat, head_format or "raw"),
            hidden_size=hidden,
            target_hidden_size=files.count(
                config.get("target_hidden_size"), "config.target_hidden_size"
            )
            or hidden,
            vocab_size=files.count(config.get("vocab_size"), "config.vocab_size"),
            draft_vocab_size=files.count(config.get("draft_vocab_size"), "config.draft_vocab_size"),
            has_d2t=has_d2t,
            aux_layer_ids=None
            if aux is None
            else tuple(files.count(a, "eagle.aux_layer_ids") or 0 for a in aux),
        )
    return replace(
        head,
        generation=cast(EagleGeneration, generation or head.generation),
        format=cast(HeadFormat, head_format or head.format),
        has_d2t=head.has_d2t if has_d2t is None else has_d2t,
    )


def _choice(data: Mapping[str, Any], key: str, allowed: tuple[str, ...]) -> str | None:
    value = files.text(data.get(key), f"eagle.{key}")
    if value is not None and value not in allowed:
        raise BadValue(f"eagle.{key}", f"is {value!r}, not one of {', '.join(allowed)}")
    return value


def _tokenizer(value: Mapping[str, Any]) -> TokenizerInfo | None:
    fingerprint = files.text(value.get("fingerprint"), "tokenizer.fingerprint")
    if fingerprint is None:
        return None
    return TokenizerInfo(
        fingerprint=fingerprint,
        vocab_len=files.count(value.get("vocab_len"), "tokenizer.vocab_len") or 0,
        bos_token=files.text(value.get("bos_token"), "tokenizer.bos_token"),
        eos_token=files.text(value.get("eos_token"), "tokenizer.eos_token"),
        source_file=files.text(value.get("source_file"), "tokenizer.source_file")
        or "tokenizer.json",
        vocab_fingerprint=files.text(value.get("vocab_fingerprint"), "tokenizer.vocab_fingerprint"),
    )


def _acceptance(value: Any, key: str) -> PublishedAcceptance:
    data = files.mapping(value, key)
    measured = files.number(data.get("value"), f"{key}.value")
    if measured is None:
        raise BadValue(f"{key}.value", "is missing")
    return PublishedAcceptance(
        value=measured,
        dataset=files.text(data.get("dataset"), f"{key}.dataset") or "",
        engine=files.text(data.get("engine"), f"{key}.engine") or "",
        source=files.text(data.get("source"), f"{key}.source") or "",
        k=files.count(data.get("k"), f"{key}.k"),
        value_max=files.number(data.get("value_max"), f"{key}.value_max"),
        settings=files.text(data.get("settings"), f"{key}.settings"),
    )
