"""catalog add / list / show: the user catalog of checkpoint facts, beside the built-in one.

`catalog add` reads a checkpoint's small files (local directory, Hugging Face cache, or the hub when
online) with the same code `validate` uses and records them under a hub id, so an air-gapped
`validate --offline` resolves that id from the user catalog. Exit 4 when nothing can be read.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from orchestrator.cli.options import format_option, offline_option
from orchestrator.errors import IncompatibleError, UsageError

if TYPE_CHECKING:
    from orchestrator.checkpoint.catalog import CatalogEntry
    from orchestrator.checkpoint.info import CheckpointInfo

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
# An HF cache snapshot: .../models--org--name/snapshots/<revision>
_CACHE_SNAPSHOT = re.compile(
    r"models--(?P<org>[^/]+?)--(?P<name>[^/]+)/snapshots/(?P<rev>[^/]+)/?$"
)


@click.group(name="catalog")
def catalog() -> None:
    """Record checkpoints for offline use, and list or show what the catalogs know.

    The user catalog is $SPECDEPLOY_CATALOG, else $XDG_CONFIG_HOME/specdeploy/catalog.json
    (~/.config/specdeploy/catalog.json). Resolution asks it after the local directory, the Hugging
    Face cache and the hub, and before the built-in catalog.
    """


@catalog.command(name="add")
@click.argument("model")
@click.option("as_id", "--as", metavar="ORG/NAME", help="Hub id to record the checkpoint under.")
@click.option("--revision", default=None, help="Hub commit or tag to read (default: main).")
@format_option
@offline_option
def add(model: str, as_id: str | None, revision: str | None, output: str, offline: bool) -> None:
    """Record the facts of MODEL (a checkpoint directory, or a hub id in the HF cache or on the
    hub) in the user catalog. A directory needs --as ORG/NAME unless it is an HF cache snapshot.
    Exit 4 when MODEL cannot be read."""
    from orchestrator.checkpoint.catalog import catalog_entry
    from orchestrator.checkpoint.catalog.user import record
    from orchestrator.checkpoint.files import read_json_object

    if as_id is not None:
        _check_hub_id(as_id)
    info, directory, origin = _read(model, revision, offline)
    name = as_id or _hub_id_of(model, directory)
    _check_hub_id(name)
    config = read_json_object(directory / "config.json") or {}
    hf_quant = read_json_object(directory / "hf_quant_config.json")
    path, replaced = record(name, info, config, added_from=origin, hf_quant_config=hf_quant)
    shadowed = catalog_entry(name)
    if shadowed is not None:
        click.echo(f"Warning: {_shadow_warning(name, shadowed, path)}", err=True)
    if output == "json":
        document = {"model": name, "catalog": str(path), "replaced": replaced, "added_from": origin}
        document["shadows"] = _shadowed_document(shadowed)
        click.echo(json.dumps({**document, "facts": _facts(info)}, indent=2))
        return
    verb = "replaced" if replaced else "recorded"
    click.echo(f"{verb} {name} in {path}")
    click.echo(f"  from:    {origin}")
    click.echo(f"  facts:   {_summary(info)}")
    if info.missing:
        click.echo(f"  missing: {', '.join(info.missing)} (rules that need them will say so)")
    click.echo(f"  use:     model: {name} now resolves offline from the user catalog")


@catalog.command(name="list")
@click.option(
    "which",
    "--catalog",
    type=click.Choice(["all", "user", "built-in"]),
    default="all",
    show_default=True,
    help="Which catalog to list.",
)
@format_option
def list_models(which: str, output: str) -> None:
    """List the models the user catalog and the built-in catalog know, user entries first."""
    entries = _entries(which)
    if output == "json":
        click.echo(json.dumps([_row_document(e) for e in entries], indent=2))
        return
    click.echo(f"{'CATALOG':<9} {'ROLES':<13} {'UNVERIFIED':>10}  MODEL")
    for entry in entries:
        roles = ",".join(entry.roles) or "-"
        click.echo(f"{entry.catalog:<9} {roles:<13} {len(entry.unverified):>10}  {entry.model}")
    users = sum(1 for e in entries if e.catalog == "user")
    click.echo(f"{len(entries)} models ({users} in the user catalog)")


@catalog.command(name="show")
@click.argument("model")
@format_option
def show(model: str, output: str) -> None:
    """Show what the catalogs record for MODEL (the user catalog first) and each fact's source.
    Exit 4 when no catalog knows MODEL."""
    from orchestrator.checkpoint.catalog import catalog_entry, catalog_models
    from orchestrator.checkpoint.catalog.entries import entry_info
    from orchestrator.checkpoint.catalog.user import user_catalog_entry, user_catalog_path

    entry = user_catalog_entry(model) or catalog_entry(model)
    if entry is None:
        close = difflib.get_close_matches(model, catalog_models(), n=3, cutoff=0.6)
        hint = f"did you mean {', '.join(close)}? or " if close else ""
        raise IncompatibleError(
            f"{model} is in neither the user catalog ({user_catalog_path()}) nor the built-in one",
            why="the catalogs hold only the checkpoints recorded or shipped with specdeploy",
            fix=f"{hint}record it with `specdeploy catalog add {model}` (online or from the HF "
            "cache) or `specdeploy catalog add DIR --as ORG/NAME`",
        )
    info = entry_info(entry, model)
    if output == "json":
        click.echo(json.dumps(_show_document(entry, info), indent=2))
    else:
        click.echo(_show_text(entry, info))


def _check_hub_id(name: str) -> None:
    """Refuse a name the hub would refuse (`a/..`, a 300-character part): what, why, fix."""
    from orchestrator.checkpoint.catalog.hub_id import MAX_PART, hub_id_problem

    problem = hub_id_problem(name)
    if problem is None:
        return
    shown = name if len(name) <= 120 else f"{name[:60]}... ({len(name)} characters)"
    raise UsageError(
        f"--as {shown!r} is not a hub id: {problem}",
        why="the user catalog records checkpoints under the id a profile names them by, and "
        "that id must be one the Hugging Face hub accepts",
        fix=f"pass --as ORG/NAME, each part 1-{MAX_PART} characters of A-Z a-z 0-9 . _ - "
        "(not starting or ending with - or ., no -- or ..), e.g. --as my-org/my-model",
    )


def _shadow_warning(name: str, shadowed: CatalogEntry, path: Path) -> str:
    return (
        f"{name} shadows the built-in catalog entry {shadowed.model} "
        f"({shadowed.location})\n"
        f"  why: from now on validate, inspect and the operator take {name}'s facts from the user "
        f"catalog {path}, not from the built-in entry\n"
        "  fix: nothing, if this is your copy of that checkpoint; otherwise record it under an "
        f"id of your own (--as ORG/NAME) and remove {name} from {path}"
    )


def _shadowed_document(shadowed: CatalogEntry | None) -> dict[str, str] | None:
    if shadowed is None:
        return None
    return {"model": shadowed.model, "catalog": shadowed.catalog, "location": shadowed.location}


def _read(model: str, revision: str | None, offline: bool) -> tuple[CheckpointInfo, Path, str]:
    """The checkpoint's facts, the directory they were read from, and a description of it."""
    from orchestrator.checkpoint.info import Unresolved
    from orchestrator.checkpoint.resolution import CheckpointResolver

    found = CheckpointResolver(base_dir=Path.cwd(), offline=offline).resolve(
        "model", model, revision
    )
    if isinstance(found, Unresolved):
        raise IncompatibleError(
            f"{model} could not be read (tried: {'; '.join(found.tried)})",
            why="catalog add records facts read from a checkpoint's config.json and tokenizer files",
            fix=found.suggestion().replace("model.revision", "--revision"),
        )
    if found.source == "catalog":
        raise IncompatibleError(
            f"{model}: no checkpoint files found, only a catalog entry ({found.location})",
            why="catalog add records what a checkpoint's own files say; it already resolves offline",
            fix=f"nothing to do to use it offline; to record your copy, download its metadata "
            f"(`huggingface-cli download {model} --include config.json 'tokenizer*' "
            "'*.index.json'`) or give its directory with --as",
        )
    directory = Path(found.location.split(" (", 1)[0])
    origin = {"local": "local directory", "hf-cache": "Hugging Face cache", "hub": "the hub"}
    at = f" at revision {found.revision}" if found.revision else ""
    return found, directory, f"{origin[found.source]} {directory}{at}"


def _hub_id_of(model: str, directory: Path) -> str:
    """The hub id to record under: MODEL itself, or the id an HF cache snapshot path spells."""
    if _HUB_ID.match(model) and not Path(model).expanduser().exists():
        return model
    snapshot = _CACHE_SNAPSHOT.search(str(directory.resolve()))
    if snapshot is not None:
        return f"{snapshot['org']}/{snapshot['name']}"
    raise click.UsageError(
        f"{model} is a directory; say which hub id it is with --as ORG/NAME "
        f"(e.g. `specdeploy catalog add {model} --as my-org/my-model`)"
    )


def _entries(which: str) -> list[CatalogEntry]:
    from orchestrator.checkpoint.catalog import catalog_entries
    from orchestrator.checkpoint.catalog.user import user_catalog_entries

    entries: list[CatalogEntry] = []
    if which in ("all", "user"):
        entries += sorted(user_catalog_entries(), key=lambda e: e.model.lower())
    if which in ("all", "built-in"):
        entries += sorted(catalog_entries(), key=lambda e: e.model.lower())
    return entries


def _row_document(entry: CatalogEntry) -> dict[str, Any]:
    return {
        "model": entry.model,
        "catalog": entry.catalog,
        "roles": list(entry.roles),
        "architectures": list(entry.config.get("architectures") or ()),
        "verifier": entry.verifier,
        "unverified": list(entry.unverified),
        "source": entry.sources[0] if entry.sources else None,
    }


def _show_document(entry: CatalogEntry, info: CheckpointInfo) -> dict[str, Any]:
    return {
        "model": entry.model,
        "catalog": entry.catalog,
        "location": entry.location,
        "roles": list(entry.roles),
        "aliases": list(entry.aliases),
        "verifier": entry.verifier,
        "facts": _facts(info),
        "config": dict(entry.config),
        "sources": list(entry.sources),
        "fact_sources": dict(entry.fact_sources),
        "unverified": list(entry.unverified),
        "published_acceptance": [dataclasses.asdict(a) for a in entry.published_acceptance],
        "notes": entry.data.get("notes"),
    }


def _facts(info: CheckpointInfo) -> dict[str, Any]:
    facts: dict[str, Any] = dataclasses.asdict(info)
    for key in ("ref", "source", "location", "sources", "unverified", "missing"):
        facts.pop(key, None)
    facts["max_context"] = info.max_context
    facts["resolved_head_dim"] = info.resolved_head_dim
    return facts


def _show_text(entry: CatalogEntry, info: CheckpointInfo) -> str:
    rows: list[tuple[str, str | None]] = [
        ("catalog", f"{entry.catalog}: {entry.location}"),
        ("roles", ", ".join(entry.roles) or None),
        ("aliases", ", ".join(entry.aliases) or None),
        ("verifier", entry.verifier),
        ("facts", _summary(info)),
        ("unverified", ", ".join(entry.unverified) or None),
    ]
    lines = [entry.model] + [f"  {label + ':':<12}{value}" for label, value in rows if value]
    lines += ["  sources:"] + [f"    - {source}" for source in entry.sources]
    lines += [f"  {fact} source: {source}" for fact, source in entry.fact_sources.items()]
    for a in entry.published_acceptance:
        span = f"{a.value:g}-{a.value_max:g}" if a.value_max is not None else f"{a.value:g}"
        k = f", k={a.k}" if a.k is not None else ""
        lines.append(f"  acceptance: {span} on {a.dataset} ({a.engine}{k}) [{a.source}]")
    if entry.data.get("notes"):
        lines.append(f"  notes:      {entry.data['notes']}")
    return "\n".join(lines)


def _summary(info: CheckpointInfo) -> str:
    def n(value: int | None) -> str:
        return "?" if value is None else str(value)

    parts = [
        f"{', '.join(info.architectures) or '?'}",
        f"{n(info.num_hidden_layers)} layers, hidden {n(info.hidden_size)}, "
        f"{n(info.num_attention_heads)}/{n(info.kv_heads)} heads",
        f"vocab {n(info.vocab_size)}, context {n(info.max_context)}",
    ]
    if info.num_experts:
        parts.append(f"{info.num_experts} experts ({n(info.num_experts_per_tok)} active)")
    if info.mtp_layers:
        parts.append(f"{info.mtp_layers} MTP layer(s)")
    if info.quant_method:
        parts.append(f"quantization {info.quant_method}")
    if info.eagle is not None:
        parts.append(f"{info.eagle.generation} head ({info.eagle.format})")
    if info.tokenizer is not None:
        parts.append(f"tokenizer sha256 {info.tokenizer.fingerprint[:12]}")
    elif info.tokenizer_family:
        parts.append(f"tokenizer family {info.tokenizer_family}")
    return "; ".join(parts)


COMMANDS: tuple[click.Command, ...] = (catalog,)
