"""Find a model's metadata: local directory, Hugging Face cache, the hub (small files), then the
user catalog (`specdeploy catalog add`) and the built-in catalog.

The order is DESIGN.md §3. Each place that was tried and failed is recorded, so an unresolvable
model becomes an `Unresolved` that says exactly where specdeploy looked and why each place failed.
`huggingface_hub` is imported only when the cache or hub is consulted (CLI start-up time).
"""

from __future__ import annotations

import os
import re
import socket
import urllib.parse
from dataclasses import replace
from pathlib import Path

from orchestrator.checkpoint.catalog import catalog_info
from orchestrator.checkpoint.catalog.user import user_catalog_info, user_catalog_path
from orchestrator.checkpoint.info import CheckpointInfo, Unresolved, looks_like_path
from orchestrator.checkpoint.reading import METADATA_FILES, read_checkpoint_dir
from orchestrator.errors import OrchestratorError

__all__ = ["CheckpointResolver", "looks_like_path"]

_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
_TRUE = frozenset({"1", "true", "yes", "on"})
# Seconds to wait for a TCP connection to the hub before treating it as unreachable.
_PROBE_TIMEOUT_S = 3.0


class CheckpointResolver:
    """Resolves `model` strings from a profile into `CheckpointInfo`, never touching weights."""

    def __init__(self, *, base_dir: Path, offline: bool, hf_cache: Path | None = None) -> None:
        self.base_dir = base_dir
        self.offline = offline or os.environ.get("HF_HUB_OFFLINE", "").lower() in _TRUE
        self.hf_cache = hf_cache

    def resolve(self, field: str, model: str, revision: str | None) -> CheckpointInfo | Unresolved:
        """Metadata of `model` (the profile's `field`), or what was tried and why it failed."""
        path = Path(model).expanduser()
        path = path if path.is_absolute() else self.base_dir / path
        tried: list[str] = []
        if path.is_dir() and (path / "config.json").is_file():
            location = str(path.resolve())
            return read_checkpoint_dir(
                path, ref=model, source="local", location=location, revision=None
            )
        if path.is_dir():
            tried.append(f"local directory: {path} has no config.json")
            return Unresolved(field=field, model=model, revision=revision, tried=tuple(tried))
        if path.exists() or looks_like_path(model):
            what = "is a file, not a checkpoint directory" if path.exists() else "does not exist"
            tried.append(f"local directory: {path} {what}")
            return Unresolved(field=field, model=model, revision=revision, tried=tuple(tried))
        if not _REPO_ID.match(model):
            tried.append(f"hub: {model!r} is neither an existing directory nor a hub id (org/name)")
            return Unresolved(field=field, model=model, revision=revision, tried=tuple(tried))
        tried.append(f"local directory: {path} does not exist")
        for step in (self._from_cache, self._from_hub):
            found = step(model, revision, tried)
            if found is not None:
                return found
        info = _from_user_catalog(model, tried) or catalog_info(model)
        if info is not None and revision is not None and revision != info.revision:
            note = f"; revision {revision} not checked (catalog facts are not versioned)"
            return replace(info, location=info.location + note)
        if info is not None:
            return info
        tried.append(f"built-in catalog: no entry for {model}")
        return Unresolved(field=field, model=model, revision=revision, tried=tuple(tried))

    def cache_dir(self) -> Path:
        """The hub cache: the explicit one, else HF_HUB_CACHE, else HF_HOME/hub."""
        if self.hf_cache is not None:
            return self.hf_cache
        if os.environ.get("HF_HUB_CACHE"):
            return Path(os.environ["HF_HUB_CACHE"]).expanduser()
        home = os.environ.get("HF_HOME") or str(Path("~/.cache/huggingface").expanduser())
        return Path(home).expanduser() / "hub"

    def _from_cache(
        self, model: str, revision: str | None, tried: list[str]
    ) -> CheckpointInfo | None:
        cache = self.cache_dir()
        # The standard cache keeps each repo in models--org--name; when that folder is absent
        # nothing can be cached, and skipping the huggingface_hub import keeps `validate` fast.
        if not (cache / ("models--" + model.replace("/", "--"))).is_dir():
            tried.append(f"Hugging Face cache {cache}: {model} is not cached")
            return None
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(
            model, "config.json", cache_dir=str(cache), revision=revision
        )
        snapshot = Path(found).parent if isinstance(found, str) else None
        location = str(snapshot)
        if snapshot is None and revision is None:
            # Downloaded at a commit only (no refs/main): one cached snapshot is unambiguous.
            snapshot = _only_snapshot(cache, model)
            location = f"{snapshot} (the only cached snapshot; no refs/main)"
        if snapshot is None:
            at = f" at revision {revision}" if revision else ""
            tried.append(f"Hugging Face cache {cache}: no config.json for {model}{at}")
            return None
        return read_checkpoint_dir(
            snapshot, ref=model, source="hf-cache", location=location, revision=snapshot.name
        )

    def _from_hub(
        self, model: str, revision: str | None, tried: list[str]
    ) -> CheckpointInfo | None:
        if self.offline:
            tried.append("hub: skipped (offline: --offline or HF_HUB_OFFLINE=1)")
            return None
        unreachable = _hub_unreachable()
        if unreachable is not None:
            tried.append(f"hub: unreachable ({unreachable})")
            return None
        try:
            snapshot = _download_metadata(model, revision, self.cache_dir())
        except Exception as exc:  # the hub client raises many types; none may crash validation
            tried.append(f"hub: {type(exc).__name__}: {_first_line(exc)}")
            return None
        return read_checkpoint_dir(
            snapshot, ref=model, source="hub", location=str(snapshot), revision=snapshot.name
        )


def _from_user_catalog(model: str, tried: list[str]) -> CheckpointInfo | None:
    """The user catalog ranks above the built-in one: a team's recorded checkpoint carries its
    tokenizer fingerprint and weight facts, the built-in entry only cited config fields."""
    try:
        info = user_catalog_info(model)
    except OrchestratorError as exc:  # a damaged file must not hide the built-in catalog
        tried.append(exc.what)
        return None
    if info is None:
        tried.append(f"user catalog {user_catalog_path()}: no entry for {model}")
    return info


def _only_snapshot(cache: Path, model: str) -> Path | None:
    from huggingface_hub.file_download import repo_folder_name

    snapshots = cache / repo_folder_name(repo_id=model, repo_type="model") / "snapshots"
    found = sorted(snapshots.glob("*/config.json")) if snapshots.is_dir() else []
    return found[0].parent if len(found) == 1 else None


def _hub_unreachable() -> str | None:
    """Why the hub endpoint cannot be reached, or None. Probed once with a short timeout because
    the hub client retries a failed request with backoff for about 25 s before giving up."""
    from huggingface_hub import constants

    url = urllib.parse.urlsplit(constants.ENDPOINT)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname or "", port), timeout=_PROBE_TIMEOUT_S).close()
    except OSError as exc:
        return f"{url.hostname}:{port}: {exc}"
    return None


def _download_metadata(model: str, revision: str | None, cache: Path) -> Path:
    """Download the small metadata files (never weights) into the cache; the snapshot dir."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError

    config = hf_hub_download(model, "config.json", revision=revision, cache_dir=str(cache))
    snapshot = Path(config).parent
    for name in METADATA_FILES:
        if name == "config.json" or (
            name == "vocab.json" and (snapshot / "tokenizer.json").exists()
        ):
            continue
        try:
            hf_hub_download(model, name, revision=revision, cache_dir=str(cache))
        except EntryNotFoundError:
            continue  # optional file; read_checkpoint_dir records what is missing
    return snapshot


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else "no message"
