"""Writing the user catalog: one writer at a time, and never a half-written or re-moded file.

`catalog add` is a read-modify-write of one JSON file, so two runs at once would each write back
what they read and lose the other's entry. `locked` holds an exclusive `flock` on a sidecar file
(`catalog.json.lock`, beside the catalog: the catalog itself is replaced by rename, so a lock on
it would be on a file that no longer has the name). `replace_file` writes a temporary file in the
same directory, fsyncs it, renames it over the catalog and fsyncs the directory; the catalog keeps
its permission bits (a 0644 catalog committed for CI stays readable to others), and a new one
gets what the umask gives. Any OS failure (a full disk, a read-only directory) is `OutputError`
with nothing left behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

from orchestrator.errors import OutputError
from orchestrator.output_dirs import fsync_directory

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | _NOFOLLOW


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock for the user catalog at `path` (blocking until it is free)."""
    lock = path.with_name(path.name + ".lock")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | _NOFOLLOW, 0o666)
    except OSError as exc:
        raise _failed(path, exc) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def replace_file(path: Path, text: str) -> None:
    """Replace `path` with `text` atomically, keeping its permission bits when it exists."""
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.specdeploy-tmp")
    try:
        mode = _mode_of(path)
        fd = os.open(temporary, _CREATE, 0o666)
        try:
            if mode is not None:
                os.fchmod(fd, mode)
            _write_all(fd, text.encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
        fsync_directory(path.parent)
    except OSError as exc:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise _failed(path, exc) from None


def _mode_of(path: Path) -> int | None:
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _failed(path: Path, exc: OSError) -> OutputError:
    where = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(path) else ""
    return OutputError(
        f"cannot write the user catalog {path}: {exc.strerror or exc}{where}",
        why="catalog add records the checkpoint there; the catalog is left as it was",
        fix="free space on its filesystem or make its directory writable, or point "
        "SPECDEPLOY_CATALOG at a file you can write",
    )
