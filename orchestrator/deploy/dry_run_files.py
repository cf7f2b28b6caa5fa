"""Dry-run deploy target: write the engine launch, engine config files and manifests to a directory.

Everything is rendered in memory first and written only when complete, so a failing render
writes nothing. The output is deterministic (sorted keys, no timestamps).

`render --out DIR` replaces DIR whole: the files are written into a new sibling directory, which
is then swapped in, so nothing from an earlier render survives (a stale baseline/ would otherwise
come back with `kubectl apply -f DIR/k8s`) and a failed write leaves the previous render intact.
Only an empty directory, or one an earlier render wrote (it holds `MARKER`), is replaced; a
symbolic link is never followed, and files are created with O_EXCL | O_NOFOLLOW in the new
directory, so nothing is written outside it.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import stat
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Final

from orchestrator.emitters.base import emitter_for
from orchestrator.engines.base import EngineLaunch
from orchestrator.errors import OutputError
from orchestrator.plan.types import DeploymentPlan

#: The file that marks a directory as written by `specdeploy render` (and so replaceable).
MARKER: Final = ".specdeploy-render"
_MARKER_TEXT: Final = (
    "Written by `specdeploy render`. `render --out` replaces this directory whole;\n"
    "files added here are deleted by the next render.\n"
)
_CREATE: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def render_files(
    plan: DeploymentPlan,
    *,
    platform: str = "kubernetes",
    options: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Relative path -> content for everything `render` writes (DESIGN.md §4): the launches,
    then the platform's objects."""
    files = _launch_files(plan.launch, "")
    baseline = plan.baseline_launch
    if baseline is not None:
        files.update(_launch_files(baseline, "baseline/"))
    files.update(emitter_for(platform, options).files(plan))
    return files


def write_files(files: dict[str, str], out_dir: Path) -> list[Path]:
    """Replace `out_dir` with exactly `files` (and `MARKER`); returns the paths written, in
    order. Raises `OutputError` (exit 1) when `out_dir` may not be replaced or a write fails."""
    relatives = sorted(_checked_relative(r) for r in files)
    target = Path(os.path.abspath(out_dir))  # "." and "x/.." get a name; links stay unresolved
    _check_replaceable(target)
    staging: Path | None = None
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        staging = _new_sibling(target, "new")
        for relative in relatives:
            _create(staging / relative, files[relative])
        _create(staging / MARKER, _MARKER_TEXT)
        _swap_in(staging, target)
        staging = None
    except OSError as exc:
        raise _write_failed(out_dir, exc) from None
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
    return [out_dir / relative for relative in relatives]


def write_file(path: Path, content: str) -> Path:
    """Write one file by creating a sibling and renaming it over `path`: a symbolic link at
    `path` is replaced, never written through. Raises `OutputError` (exit 1)."""
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.specdeploy-tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _create(temporary, content)
        os.replace(temporary, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise _write_failed(path, exc) from None
    return path


def _checked_relative(relative: str) -> str:
    parts = PurePosixPath(relative).parts
    if not parts or relative.startswith("/") or any(p in ("..", ".") for p in parts):
        raise ValueError(f"render produced a path outside its directory: {relative!r}")
    return relative


def _check_replaceable(out_dir: Path) -> None:
    try:
        mode = out_dir.lstat().st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise _write_failed(out_dir, exc) from None
    if stat.S_ISLNK(mode):
        raise OutputError(
            f"--out {out_dir} is a symbolic link (to {os.readlink(out_dir)})",
            why="render replaces the --out directory itself and never writes through a link",
            fix="pass the directory the link points to, or a new directory",
        )
    if not stat.S_ISDIR(mode):
        raise OutputError(
            f"--out {out_dir} exists and is not a directory",
            why="render writes a directory of files there",
            fix="pass a new directory for --out, or remove the file",
        )
    try:
        entries = sorted(os.listdir(out_dir))
    except OSError as exc:
        raise _write_failed(out_dir, exc) from None
    if entries and MARKER not in entries:
        shown = ", ".join(entries[:5]) + (
            f" and {len(entries) - 5} more" if len(entries) > 5 else ""
        )
        raise OutputError(
            f"--out {out_dir} holds files specdeploy did not write ({shown})",
            why=f"render replaces the --out directory whole; it replaces only an empty directory "
            f"or one an earlier render wrote (that one holds {MARKER})",
            fix="pass a new or empty directory for --out, or delete this one yourself",
        )


def _new_sibling(out_dir: Path, kind: str) -> Path:
    """A new, empty directory beside `out_dir` (same filesystem, so the swap is a rename)."""
    for _ in range(8):
        candidate = out_dir.with_name(f".{out_dir.name}.{secrets.token_hex(4)}.specdeploy-{kind}")
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        return candidate
    raise FileExistsError(f"no free temporary name beside {out_dir}")


def _create(path: Path, content: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, _CREATE, 0o666)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(content)


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


def _write_failed(path: Path, exc: OSError) -> OutputError:
    where = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(path) else ""
    return OutputError(
        f"cannot write the render to {path}: {exc.strerror or exc}{where}",
        why="render writes launch.json, engine config files and manifests there",
        fix="pass --out (or --helm-values) a location you can write to, on a filesystem "
        "with free space",
    )


def _launch_files(launch: EngineLaunch, prefix: str) -> dict[str, str]:
    files = {f"{prefix}launch.json": json.dumps(launch.as_json(), indent=2, sort_keys=True) + "\n"}
    for name, content in launch.config_files.items():
        files[f"{prefix}{name}"] = content
    return files
