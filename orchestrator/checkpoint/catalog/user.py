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
from pathlib import Path
from typing import Any, cast

from orchestrator.checkpoint.catalog.entries import CatalogEntry, entry_info, parse_entry
from orchestrator.checkpoint.info import CheckpointInfo
from orchestrator.errors import IncompatibleError

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
    """The user catalog's facts about `model` (hub id, case-insensitive), or None.

    Raises `IncompatibleError` when the file exists but cannot be read as a catalog."""
    entry = user_catalog_entry(model)
    return entry_info(entry, model) if entry is not None else None


def user_catalog_entry(model: str) -> CatalogEntry | None:
    """The user catalog's entry for `model` (case-insensitive), or None."""
    wanted = model.lower()
    return next((e for e in user_catalog_entries() if e.model.lower() == wanted), None)


def user_catalog_entries() -> tuple[CatalogEntry, ...]:
    """Every entry of the user catalog (none when the file does not exist)."""
    path = user_catalog_path()
    models = cast(dict[str, dict[str, Any]], _read(path)["models"])
    return tuple(parse_entry(name, data, "user", str(path)) for name, data in models.items())


def record(
    model: str,
    info: CheckpointInfo,
    config: Mapping[str, Any],
    *,
    added_from: str,
    hf_quant_config: Mapping[str, Any] | None = None,
) -> tuple[Path, bool]:
    """Store `info` (read from `config`) under the hub id `model`; returns the catalog path and
    whether an entry of that name was replaced. The file is replaced atomically."""
    path = user_catalog_path()
    document = _read(path)
    models = cast(dict[str, Any], document["models"])
    replaced = [name for name in models if name.lower() == model.lower()]
    for name in replaced:
        del models[name]
    models[model] = _entry(info, config, added_from, hf_quant_config)
    _write(path, document)
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
    if not path.exists():
        return {"format": _FORMAT, "models": {}}
    try:
        document = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise _unreadable(path, f"{type(exc).__name__}: {exc}") from None
    if not isinstance(document, dict) or not isinstance(document.get("models"), dict):
        raise _unreadable(path, 'it is not a JSON object with a "models" object')
    return document


def _write(path: Path, document: dict[str, Any]) -> None:
    import tempfile  # see _entry: only `catalog add` writes

    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".catalog-", suffix=".json")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(text)
    os.replace(temporary, path)


def _unreadable(path: Path, reason: str) -> IncompatibleError:
    return IncompatibleError(
        f"user catalog {path} cannot be read ({reason})",
        why="specdeploy resolves recorded checkpoints from it; a damaged file hides them all",
        fix=f"repair {path}, or move it aside and record the checkpoints again with "
        f"`specdeploy catalog add` (or point {ENV_VAR} at another file)",
    )
