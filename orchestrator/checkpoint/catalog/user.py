"""The user catalog: checkpoints a team recorded with `specdeploy catalog add`, for offline use.

One JSON file: `$SPECDEPLOY_CATALOG` when set, else `$XDG_CONFIG_HOME/specdeploy/catalog.json`
(`~/.config/specdeploy/catalog.json` by default). Each entry keeps the checkpoint's raw
`config.json`, the tokenizer fingerprint and the weight facts read when it was added, so a model
resolved from here is checked as strictly as the directory it came from. Resolution asks this
catalog after the local directory, the Hugging Face cache and the hub, and before the built-in one.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from orchestrator.checkpoint.catalog.entries import CatalogEntry, entry_info, parse_entry
from orchestrator.checkpoint.catalog.hub_id import hub_id_problem
from orchestrator.checkpoint.files import MAX_JSON_BYTES, BadValue, describe
from orchestrator.checkpoint.info import CheckpointInfo
from orchestrator.errors import IncompatibleError
from orchestrator.untrusted_files import UnreadableFile, parse_json, read_regular_file

ENV_VAR = "SPECDEPLOY_CATALOG"
_FORMAT = 1


def user_catalog_path() -> Path:
    """Where the user catalog lives (it need not exist yet)."""
    explicit = os.environ.get(ENV_VAR)
    if explicit:
        return Path(explicit).expanduser()
    config_home = os.environ.get("XDG_CONFIG_HOME") or str(Path("~/.config").expanduser())
    return Path(config_home).expanduser() / "specdeploy" / "catalog.json"


def user_catalog_info(model: str) -> CheckpointInfo | None:
    """The user catalog's facts about `model` (hub id, case-insensitive), or None. A damaged
    entry or file is skipped and reported once (`take_warnings`); it never raises."""
    entry = user_catalog_entry(model)
    return entry_info(entry, model) if entry is not None else None


def user_catalog_entry(model: str) -> CatalogEntry | None:
    """The user catalog's entry for `model` (case-insensitive), or None."""
    wanted = model.lower()
    return next((e for e in user_catalog_entries() if e.model.lower() == wanted), None)


def user_catalog_entries() -> tuple[CatalogEntry, ...]:
    """Every usable entry of the user catalog (none when the file does not exist)."""
    return load_user_catalog().entries


def user_catalog_damage(model: str) -> str | None:
    """Why the user catalog could not give `model`, when its entry or the file is damaged."""
    catalog = load_user_catalog()
    return catalog.damaged.get(model.lower()) or catalog.unreadable


@dataclass(frozen=True)
class CatalogWarning:
    """A damaged part of the user catalog, said once per run: what, why and how to fix."""

    what: str
    why: str
    fix: str

    def render(self) -> str:
        return f"{self.what}\n  why: {self.why}\n  fix: {self.fix}"


@dataclass(frozen=True)
class UserCatalog:
    """The user catalog as read: its usable entries, and what was skipped and why."""

    path: Path
    entries: tuple[CatalogEntry, ...]
    damaged: Mapping[str, str]
    """Lower-cased hub id -> why its entry was skipped."""
    unreadable: str | None
    """Why the whole file was skipped, when it was."""


def load_user_catalog() -> UserCatalog:
    """The user catalog, read once per version of the file (path, size and modification time).
    Damaged entries are skipped, each reported once by name with the file (`take_warnings`)."""
    path = user_catalog_path()
    try:
        stat = path.stat()
    except FileNotFoundError:
        return UserCatalog(path, (), {}, None)
    except OSError as exc:
        return _unusable(path, f"{exc.strerror or exc}")
    signature = (str(path), stat.st_ino, stat.st_size, stat.st_mtime_ns)
    cached = _CACHE.get(str(path))
    if cached is not None and cached[0] == signature:
        return cached[1]
    document = _document(path)
    if isinstance(document, str):
        catalog = _unusable(path, document)
    else:
        catalog = _parse_all(path, _models(document))
    _CACHE[str(path)] = (signature, catalog)
    return catalog


def take_warnings() -> list[CatalogWarning]:
    """The warnings not handed out yet (the CLI prints them once, at the end of a command)."""
    pending = list(_PENDING)
    _PENDING.clear()
    return pending


_CACHE: dict[str, tuple[tuple[object, ...], UserCatalog]] = {}
_PENDING: list[CatalogWarning] = []
_WARNED: set[str] = set()


def _warn(warning: CatalogWarning) -> None:
    if warning.what not in _WARNED:
        _WARNED.add(warning.what)
        _PENDING.append(warning)


def _unusable(path: Path, reason: str) -> UserCatalog:
    _warn(
        CatalogWarning(
            f"user catalog {path} is skipped: {reason}",
            why="specdeploy resolves recorded checkpoints from it; until it is repaired none of "
            "them resolves from it (the built-in catalog still answers)",
            fix=f"repair {path}, or move it aside and record the checkpoints again with "
            f"`specdeploy catalog add` (or point {ENV_VAR} at another file)",
        )
    )
    return UserCatalog(path, (), {}, f"user catalog {path} is skipped: {reason}")


def _models(document: dict[str, Any]) -> dict[str, Any]:
    return cast(dict[str, Any], document["models"])


def _parse_all(path: Path, models: Mapping[str, Any]) -> UserCatalog:
    entries: list[CatalogEntry] = []
    damaged: dict[str, str] = {}
    for name, data in models.items():
        problem = _entry_problem(name, data)
        if problem is None:
            try:
                entry = parse_entry(name, data, "user", str(path))
                entry_info(entry, name)  # every fact is checked once, here
            except BadValue as exc:
                problem = f"`{exc.key}` {exc.problem}"
            else:
                entries.append(entry)
                continue
        reason = f"user catalog {path}: entry {_shown(name)} is skipped: {problem}"
        damaged[name.lower()] = reason
        again = (
            f"record it again with `specdeploy catalog add DIR --as {name}` (that replaces the "
            "entry), or "
            if hub_id_problem(name) is None
            else ""
        )
        _warn(
            CatalogWarning(
                reason,
                why="a damaged entry cannot give checkpoint facts; every other model still "
                "resolves, but this one does not resolve from the user catalog",
                fix=f"{again}repair, rename or delete the entry in {path}",
            )
        )
    return UserCatalog(path, tuple(entries), damaged, None)


def _entry_problem(name: str, data: Any) -> str | None:
    problem = hub_id_problem(name)
    if problem is not None:
        return f"its name is not a hub id ({problem})"
    if not isinstance(data, dict):
        return f"it is {describe(data)}, not a JSON object"
    if "config" not in data:
        return "it has no `config` (the checkpoint's config.json, which catalog add records)"
    return None


def _shown(name: str) -> str:
    return repr(name) if len(name) <= 100 else f"{name[:60]!r}... ({len(name)} characters)"


def record(
    model: str,
    info: CheckpointInfo,
    config: Mapping[str, Any],
    *,
    added_from: str,
    hf_quant_config: Mapping[str, Any] | None = None,
) -> tuple[Path, bool]:
    """Store `info` (read from `config`) under the hub id `model`; returns the catalog path and
    whether an entry of that name was replaced. The read-modify-write holds an exclusive lock
    (concurrent adds keep every entry), and the file is replaced atomically with its mode kept.
    Other entries, damaged ones included, are kept as they are. Raises `OutputError` (exit 1)
    when the file cannot be written, `IncompatibleError` when it cannot be read."""
    from orchestrator.checkpoint.catalog.user_store import locked, replace_file

    path = user_catalog_path()
    entry = _entry(info, config, added_from, hf_quant_config)
    with locked(path):
        document = _read(path)
        models = _models(document)
        replaced = [name for name in models if name.lower() == model.lower()]
        for name in replaced:
            del models[name]
        models[model] = entry
        text = json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
        replace_file(path, text)
    return path, bool(replaced)


def _entry(
    info: CheckpointInfo,
    config: Mapping[str, Any],
    added_from: str,
    hf_quant_config: Mapping[str, Any] | None,
) -> dict[str, Any]:
    # Only `catalog add` writes; resolution (every validate) imports this module, so the
    # writer's modules load here rather than at start-up.
    from datetime import datetime, timezone

    entry: dict[str, Any] = {
        "roles": ["head"] if info.eagle is not None else ["target"],
        "added_from": added_from,
        "added_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "revision": info.revision,
        "config": dict(config),
        "tokenizer": dataclasses.asdict(info.tokenizer) if info.tokenizer else None,
        "weight_bytes": info.weight_bytes,
        "param_count": info.param_count,
        "mtp_tensor_count": info.mtp_tensor_count,
        "eagle": _eagle(info),
        "missing": list(info.missing),
        "sources": [f"recorded by specdeploy catalog add from {added_from}"],
    }
    if hf_quant_config is not None:
        entry["hf_quant_config"] = dict(hf_quant_config)
    return {key: value for key, value in entry.items() if value is not None}


def _eagle(info: CheckpointInfo) -> dict[str, Any] | None:
    head = info.eagle
    if head is None:
        return None
    return {
        "generation": head.generation,
        "format": head.format,
        "has_d2t": head.has_d2t,
        "aux_layer_ids": list(head.aux_layer_ids) if head.aux_layer_ids is not None else None,
    }


def _read(path: Path) -> dict[str, Any]:
    document = _document(path)
    if isinstance(document, str):
        raise _unreadable(path, document)
    return document


def _document(path: Path) -> dict[str, Any] | str:
    """The catalog's JSON document (an empty one when there is no file), or why it is unusable."""
    try:
        raw = read_regular_file(path, MAX_JSON_BYTES)
        document = None if raw is None else parse_json(raw)
    except UnreadableFile as exc:
        return f"it {exc.problem}"
    except ValueError as exc:
        return f"it {exc}"
    if raw is None:
        return {"format": _FORMAT, "models": {}}
    if not isinstance(document, dict) or not isinstance(document.get("models"), dict):
        return f'it holds {describe(document)}, not a JSON object with a "models" object'
    return document


def _unreadable(path: Path, reason: str) -> IncompatibleError:
    return IncompatibleError(
        f"user catalog {path} cannot be read ({reason})",
        why="specdeploy resolves recorded checkpoints from it; a damaged file hides them all",
        fix=f"repair {path}, or move it aside and record the checkpoints again with "
        f"`specdeploy catalog add` (or point {ENV_VAR} at another file)",
    )
