"""The shared output-directory writer (`render --out`, `suggest --write`): each command's own
marker and messages, every file and directory fsynced before the swap, and a full disk leaves no
file behind. The directory rules themselves are tested through render in
tests/unit/deploy/test_dry_run_files.py and end to end in tests/hostile/."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from orchestrator import output_dirs
from orchestrator.deploy.dry_run_files import RENDER
from orchestrator.errors import OutputError
from orchestrator.output_dirs import write_file, write_files
from orchestrator.suggest.write import SUGGESTED

FILES = {"01-a.yaml": "a: 1\n", "sub/02-b.yaml": "b: 2\n"}


def test_each_command_replaces_only_its_own_directories(tmp_path: Path) -> None:
    out = tmp_path / "out"
    write_files(FILES, out, SUGGESTED)
    assert (out / SUGGESTED.marker).read_text() == SUGGESTED.marker_text
    write_files(FILES, out, SUGGESTED)  # its own: replaced
    with pytest.raises(OutputError) as caught:
        write_files(FILES, out, RENDER)  # another command's: refused
    assert caught.value.what.startswith(f"--out {out} holds files specdeploy did not write")
    assert RENDER.marker in caught.value.why
    assert sorted(p.name for p in out.iterdir()) == sorted(["01-a.yaml", "sub", SUGGESTED.marker])


def test_every_file_and_directory_is_fsynced_before_the_swap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[str] = []
    real_fsync = os.fsync

    def recording(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(output_dirs.os, "fsync", recording)
    out = tmp_path / "out"
    write_files(FILES, out, SUGGESTED)
    names = [Path(p).name for p in synced]
    assert {"01-a.yaml", "02-b.yaml", SUGGESTED.marker, "sub"} <= set(names)
    assert str(tmp_path) == synced[-1]  # the parent, after the rename


@pytest.mark.parametrize("earlier", [False, True])
def test_a_full_disk_leaves_no_file_and_the_earlier_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, earlier: bool
) -> None:
    out = tmp_path / "out"
    if earlier:
        write_files({"old.yaml": "old\n"}, out, SUGGESTED)

    def full(fd: int, data: object) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(output_dirs.os, "write", full)
    with pytest.raises(OutputError) as caught:
        write_files(FILES, out, SUGGESTED)
    error = caught.value
    assert error.exit_code == 1
    assert error.what == f"cannot write the suggested profiles to {out}: No space left on device"
    assert error.why == SUGGESTED.why_write and error.fix == SUGGESTED.fix
    assert [p.name for p in tmp_path.iterdir()] == (["out"] if earlier else [])
    if earlier:
        assert (out / "old.yaml").read_text() == "old\n"


def test_a_single_file_on_a_full_disk_leaves_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(fd: int, data: object) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(output_dirs.os, "write", full)
    with pytest.raises(OutputError, match="No space left on device"):
        write_file(tmp_path / "values.yaml", "x: 1\n", RENDER)
    assert list(tmp_path.iterdir()) == []


def test_a_file_named_like_the_marker_is_a_bug(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="named like its marker"):
        write_files({SUGGESTED.marker: "x"}, tmp_path / "out", SUGGESTED)
