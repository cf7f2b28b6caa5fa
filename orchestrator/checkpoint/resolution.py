"""Find a model's metadata: local directory, Hugging Face cache, the hub (small files), then the
user catalog (`specdeploy catalog add`) and the built-in catalog.

The order is DESIGN.md §3. Each place that was tried and failed is recorded, so an unresolvable
model becomes an `Unresolved` that says exactly where specdeploy looked and why each place failed.
A metadata file that is found but unusable stops the search there (`Unresolved.unreadable`): a
damaged file is reported, never skipped in favour of older facts.

The hub is asked over HTTP first (one request, short timeout), and the whole hub step runs under
one deadline (`HUB_DEADLINE_S`, or SPECDEPLOY_HUB_TIMEOUT seconds): a hub or proxy that accepts
connections and never answers would otherwise hold `validate` for minutes while the hub client
retries each file with backoff.
`huggingface_hub` is imported only when the cache or hub is consulted (CLI start-up time).
"""

from __future__ import annotations

import os
import re
import threading
import urllib.parse
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Final, TypeVar

from orchestrator.checkpoint.catalog import catalog_info
from orchestrator.checkpoint.catalog.user import (
    user_catalog_damage,
    user_catalog_info,
    user_catalog_path,
)
from orchestrator.checkpoint.files import UnreadableMetadata
from orchestrator.checkpoint.info import HUB_SILENT, CheckpointInfo, Unresolved, looks_like_path
from orchestrator.checkpoint.reading import METADATA_FILES, read_checkpoint_dir

__all__ = ["CheckpointResolver", "looks_like_path"]

# A hub repo id: optional namespace, then a name; each part at most 96 characters (the hub's own
# limit: huggingface_hub `validate_repo_id`).
_REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]{0,95}(/[\w.-]{1,96})?")
_TRUE = frozenset({"1", "true", "yes", "on"})
#: Seconds the whole hub step (probe and metadata downloads) may take for one model.
HUB_DEADLINE_S: Final = 30.0
#: Seconds to wait for the hub's answer to the reachability probe.
PROBE_TIMEOUT_S: Final = 5.0
HUB_TIMEOUT_ENV: Final = "SPECDEPLOY_HUB_TIMEOUT"
T = TypeVar("T")


class CheckpointResolver:
    """Resolves `model` strings from a profile into `CheckpointInfo`, never touching weights."""

    def __init__(self, *, base_dir: Path, offline: bool, hf_cache: Path | None = None) -> None:
        self.base_dir = base_dir
        self.offline = offline or os.environ.get("HF_HUB_OFFLINE", "").lower() in _TRUE
        self.hf_cache = hf_cache
        self._hub_silent: str | None = None  # set once the hub failed to answer in time
        self._reading = "local directory"  # the place whose files are being read

    def resolve(self, field: str, model: str, revision: str | None) -> CheckpointInfo | Unresolved:
        """Metadata of `model` (the profile's `field`), or what was tried and why it failed."""
        tried: list[str] = []
        self._reading = "local directory"
        try:
            found = self._resolve(model, revision, tried)
        except UnreadableMetadata as exc:
            problem = exc.describe()
            tried.append(f"{self._reading}: unreadable: {problem}")
            return Unresolved(field, model, revision, tuple(tried), unreadable=problem)
        return found or Unresolved(field, model, revision, tuple(tried))

    def _resolve(self, model: str, revision: str | None, tried: list[str]) -> CheckpointInfo | None:
        path, problem = self._local_path(model)
        if problem is not None:
            tried.append(f"local directory: {problem}")
            return None
        assert path is not None
        if _is_dir(path) and _exists(path / "config.json"):  # read even if unusable: say why
            location = str(path.resolve())
            return read_checkpoint_dir(
                path, ref=model, source="local", location=location, revision=None
            )
        if _is_dir(path):
            tried.append(f"local directory: {path} has no config.json")
            return None
        if _exists(path) or looks_like_path(model):
            what = "is a file, not a checkpoint directory" if _exists(path) else "does not exist"
            tried.append(f"local directory: {path} {what}")
            return None
        if not _REPO_ID.fullmatch(model):
            tried.append(
                f"hub: {_clip(model)!r} is neither an existing directory nor a hub id (org/name, "
                "each part at most 96 characters)"
            )
            return None
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
        return None

    def _local_path(self, model: str) -> tuple[Path | None, str | None]:
        """The directory `model` names, or why it cannot name one."""
        if "\x00" in model:
            return None, "a path cannot contain a NUL character"
        try:
            path = Path(model).expanduser()
        except RuntimeError:  # "~user" of a user this host does not know
            return None, f"{_clip(model)!r} starts with ~user, and no such user exists here"
        return (path if path.is_absolute() else self.base_dir / path), None

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
        if not _is_dir(cache / ("models--" + model.replace("/", "--"))):
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
        self._reading = f"Hugging Face cache {cache}"
        return read_checkpoint_dir(
            snapshot, ref=model, source="hf-cache", location=location, revision=snapshot.name
        )

    def _from_hub(
        self, model: str, revision: str | None, tried: list[str]
    ) -> CheckpointInfo | None:
        if self.offline:
            tried.append("hub: skipped (offline: --offline or HF_HUB_OFFLINE=1)")
            return None
        if self._hub_silent is not None:  # one deadline per run, not one per model
            tried.append(self._hub_silent)
            return None
        deadline = hub_deadline()
        cache = self.cache_dir()
        finished, outcome = _within(deadline, lambda: _ask_hub(model, revision, cache, deadline))
        if not finished:
            outcome = (
                f"hub: did not answer ({_host(_endpoint())}: no complete answer within "
                f"{deadline:g} s; {HUB_TIMEOUT_ENV} sets this deadline)"
            )
        if isinstance(outcome, str):
            if outcome.startswith(HUB_SILENT):
                self._hub_silent = outcome
            tried.append(outcome)
            return None
        assert outcome is not None
        self._reading = "hub"
        return read_checkpoint_dir(
            outcome, ref=model, source="hub", location=str(outcome), revision=outcome.name
        )


def _from_user_catalog(model: str, tried: list[str]) -> CheckpointInfo | None:
    """The user catalog ranks above the built-in one: a team's recorded checkpoint carries its
    tokenizer fingerprint and weight facts, the built-in entry only cited config fields. A damaged
    entry or file never hides the built-in catalog: it is skipped (and said once, as a warning)."""
    info = user_catalog_info(model)
    if info is None:
        damage = user_catalog_damage(model)
        tried.append(damage or f"user catalog {user_catalog_path()}: no entry for {model}")
    return info


def hub_deadline() -> float:
    """Seconds the hub step may take: SPECDEPLOY_HUB_TIMEOUT when it is a positive number."""
    try:
        value = float(os.environ.get(HUB_TIMEOUT_ENV, ""))
    except ValueError:
        return HUB_DEADLINE_S
    return value if 0 < value < 3600 else HUB_DEADLINE_S


def _ask_hub(model: str, revision: str | None, cache: Path, deadline: float) -> Path | str:
    """The downloaded snapshot directory, or the `tried` entry saying why there is none."""
    unreachable = _hub_unreachable(model, revision, min(PROBE_TIMEOUT_S, deadline))
    if unreachable is not None:
        return unreachable
    try:
        return _download_metadata(model, revision, cache)
    except Exception as exc:  # the hub client raises many types; none may crash validation
        return f"hub: {type(exc).__name__}: {_first_line(exc)}"


def _within(seconds: float, work: Callable[[], T]) -> tuple[bool, T | None]:
    """Run `work` in a daemon thread for at most `seconds`: (finished, result). A thread cannot
    be cancelled; one still blocked on a silent server is abandoned and ends with the process."""
    result: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            result.append(work())
        except BaseException as exc:  # re-raised in the caller's thread
            errors.append(exc)

    thread = threading.Thread(target=run, name="specdeploy-hub", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        return False, None
    if errors:
        raise errors[0]
    return True, result[0]


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except (OSError, ValueError):  # a name too long for this filesystem
        return False


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except (OSError, ValueError):
        return False


def _clip(text: str) -> str:
    return text if len(text) <= 60 else text[:60] + "..."


def _only_snapshot(cache: Path, model: str) -> Path | None:
    from huggingface_hub.file_download import repo_folder_name

    snapshots = cache / repo_folder_name(repo_id=model, repo_type="model") / "snapshots"
    found = sorted(snapshots.glob("*/config.json")) if snapshots.is_dir() else []
    return found[0].parent if len(found) == 1 else None


def _hub_unreachable(model: str, revision: str | None, timeout: float) -> str | None:
    """Why the hub cannot serve `model`, or None when it answers. One HTTP request (a bare TCP
    connect would pass a proxy or server that accepts connections and never answers): a HEAD of
    the file the download asks for first, without retries. 5xx answers stop here too, because
    the hub client would retry them with backoff."""
    import httpx

    url = hub_file_url(model, revision, "config.json")
    where = _host(url)
    try:
        response = httpx.head(url, timeout=timeout, follow_redirects=False)
    except httpx.TimeoutException:
        return f"hub: did not answer ({where}: no HTTP response within {timeout:g} s)"
    except (httpx.HTTPError, OSError, ValueError) as exc:
        return f"hub: unreachable ({where}: {_first_line(exc) or type(exc).__name__})"
    if response.status_code >= 500:
        return f"hub: answered HTTP {response.status_code} ({where}); not retried"
    return None


def hub_file_url(model: str, revision: str | None, filename: str) -> str:
    """The hub's URL of one file at a revision, every path segment quoted: the repo id keeps its
    one '/' between owner and name, and a revision is one segment whatever it holds (refs/pr/1
    becomes refs%2Fpr%2F1, as the hub expects), so no value can reach another path."""
    repo = "/".join(_quoted(part) for part in model.split("/"))
    return f"{_endpoint()}/{repo}/resolve/{_quoted(revision or 'main')}/{_quoted(filename)}"


def _quoted(segment: str) -> str:
    # quote() keeps '.', so a '.' or '..' segment would still be a dot segment a client resolves.
    if segment in (".", ".."):
        return segment.replace(".", "%2E")
    return urllib.parse.quote(segment, safe="")


def _endpoint() -> str:
    from huggingface_hub import constants

    return str(constants.ENDPOINT).rstrip("/")


def _host(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.hostname}:{port}"


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
