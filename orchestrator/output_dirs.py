"""Writing a directory of output files safely: `render --out DIR` and `suggest --write DIR`.

DIR is replaced whole: the files are written into a new sibling directory, which is then swapped
in, so nothing from an earlier run survives (a stale baseline/ would otherwise come back with
`kubectl apply -f DIR/k8s`) and a failed write (a full disk) leaves DIR as it was and no
temporary file behind. Only a new or empty directory, or one an earlier run of the same command
wrote (it holds that command's marker file), is replaced; a symbolic link is never followed, and
files are created with O_EXCL | O_NOFOLLOW in the new directory, so nothing is written outside
it. Every file and directory is fsynced before the swap, and the parent after it. Any OS failure
is `OutputError` (exit 1) with what, why and fix.

Each command describes itself with an `OwnedDirectory` (its option, marker and messages).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Final

from orchestrator.errors import OutputError

_CREATE: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class OwnedDirectory:
    """A kind of output directory one command writes, and how its messages name it."""

    command: str
    """The command (`render`), as messages name it."""
    option: str
    """The option that names the directory (`--out`)."""
    marker: str
    """The file that marks a directory as written by `command` (and so replaceable)."""
    marker_text: str
    """What the marker file says to someone who opens it."""
    output: str
    """What is written, as in "cannot write {output} to DIR" (`the render`)."""
    why_write: str
    """Why a failed write matters: what the directory would have held, and what is left."""
    fix: str
    """How to fix a failed write (a full disk, a directory that is not writable)."""


def write_files(files: dict[str, str], out_dir: Path, kind: OwnedDirectory) -> list[Path]:
    """Replace `out_dir` with exactly `files` (and `kind.marker`); returns the paths written, in
    order. Raises `OutputError` (exit 1) when `out_dir` may not be replaced or a write fails."""
    relatives = sorted(_checked_relative(r, kind) for r in files)
    target = Path(os.path.abspath(out_dir))  # "." and "x/.." get a name; links stay unresolved
    _check_replaceable(target, kind)
    staging: Path | None = None
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        staging = _new_sibling(target, "new")
        for relative in relatives:
            _create(staging / relative, files[relative])
        _create(staging / kind.marker, kind.marker_text)
        _fsync_tree(staging)
        _swap_in(staging, target)
        staging = None
        fsync_directory(target.parent)
    except OSError as exc:
        raise _write_failed(out_dir, exc, kind) from None
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
    return [out_dir / relative for relative in relatives]


def write_file(path: Path, content: str, kind: OwnedDirectory) -> Path:
    """Write one file by creating a sibling and renaming it over `path`: a symbolic link at
    `path` is replaced, never written through. Raises `OutputError` (exit 1)."""
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.specdeploy-tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _create(temporary, content)
        os.replace(temporary, path)
        fsync_directory(path.parent)
    except OSError as exc:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise _write_failed(path, exc, kind) from None
    return path


def _checked_relative(relative: str, kind: OwnedDirectory) -> str:
    parts = PurePosixPath(relative).parts
    if not parts or relative.startswith("/") or any(p in ("..", ".") for p in parts):
        raise ValueError(f"{kind.command} produced a path outside its directory: {relative!r}")
    if relative == kind.marker:
        raise ValueError(f"{kind.command} produced a file named like its marker: {relative!r}")
    return relative


def _check_replaceable(out_dir: Path, kind: OwnedDirectory) -> None:
    named = f"{kind.option} {out_dir}"
    try:
        mode = out_dir.lstat().st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise _write_failed(out_dir, exc, kind) from None
    if stat.S_ISLNK(mode):
        raise OutputError(
            f"{named} is a symbolic link (to {os.readlink(out_dir)})",
            why=f"{kind.command} replaces the {kind.option} directory itself and never writes "
            "through a link",
            fix="pass the directory the link points to, or a new directory",
        )
    if not stat.S_ISDIR(mode):
        raise OutputError(
            f"{named} exists and is not a directory",
            why=f"{kind.command} writes a directory of files there",
            fix=f"pass a new directory for {kind.option}, or remove the file",
        )
    try:
        entries = sorted(os.listdir(out_dir))
    except OSError as exc:
        raise _write_failed(out_dir, exc, kind) from None
    if entries and kind.marker not in entries:
        shown = ", ".join(entries[:5]) + (
            f" and {len(entries) - 5} more" if len(entries) > 5 else ""
        )
        raise OutputError(
            f"{named} holds files specdeploy did not write ({shown})",
            why=f"{kind.command} replaces the {kind.option} directory whole; it replaces only an "
            f"empty directory or one an earlier {kind.command} {kind.option} wrote (that one "
            f"holds {kind.marker})",
            fix=f"pass a new or empty directory for {kind.option}, or delete this one yourself",
        )


def _new_sibling(out_dir: Path, suffix: str) -> Path:
    """A new, empty directory beside `out_dir` (same filesystem, so the swap is a rename)."""
    for _ in range(8):
        candidate = out_dir.with_name(f".{out_dir.name}.{secrets.token_hex(4)}.specdeploy-{suffix}")
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        return candidate
    raise FileExistsError(f"no free temporary name beside {out_dir}")


def _create(path: Path, content: str) -> None:
    """Create `path` (never through a link, never over a file), write `content`, fsync it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, _CREATE, 0o666)
    try:
        view = memoryview(content.encode("utf-8"))
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(root: Path) -> None:
    """fsync every directory under `root` (the files were fsynced as they were written)."""
    for directory, _, _ in os.walk(root):
        fsync_directory(Path(directory))


def fsync_directory(directory: Path) -> None:
    """Make new entries in `directory` durable; a filesystem that cannot fsync a directory is
    not an error."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.EBADF, errno.ENOTSUP):
            raise
    finally:
        os.close(fd)


def _swap_in(staging: Path, out_dir: Path) -> None:
    """Rename `staging` to `out_dir`; a previous `out_dir` is moved aside first and deleted
    after, or moved back when the second rename fails."""
    if not out_dir.exists():
        os.rename(staging, out_dir)
        return
    previous = out_dir.with_name(f".{out_dir.name}.{secrets.token_hex(4)}.specdeploy-old")
    os.rename(out_dir, previous)
    try:
        os.rename(staging, out_dir)
    except OSError:
        os.rename(previous, out_dir)
        raise
    shutil.rmtree(previous, ignore_errors=True)


def _write_failed(path: Path, exc: OSError, kind: OwnedDirectory) -> OutputError:
    where = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(path) else ""
    return OutputError(
        f"cannot write {kind.output} to {path}: {exc.strerror or exc}{where}",
        why=kind.why_write,
        fix=kind.fix,
    )
