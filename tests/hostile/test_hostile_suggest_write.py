"""suggest --write DIR against a hostile or foreign directory (issue 19 §1): it is written as
`render --out` writes its directory. A DIR that is a symbolic link, a user's file of the same name
as a profile and any other foreign file are refused; a link planted inside an earlier output is
replaced, not written through; a re-run replaces its own output; a full disk is exit 1 with
what/why/fix and leaves no partial profile and no temporary file. Every run has a memory cap and a
deadline, ends without a traceback, and changes nothing outside DIR."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.hostile.capped_cli import Run, specdeploy

TARGET = "Qwen/Qwen3-8B"
MARKER = ".specdeploy-suggest"


@dataclass(frozen=True)
class Sandbox:
    root: Path
    out: Path
    env: dict[str, str]

    def suggest(self, *extra: str, out: Path | None = None, full_disk: bool = False) -> Run:
        where = str(out or self.out)
        return specdeploy(
            "suggest",
            TARGET,
            "--offline",
            "--write",
            where,
            *extra,
            env=self.env,
            cwd=self.root,
            full_disk=full_disk,
        )

    def outside(self) -> dict[str, tuple[int, bytes]]:
        """Every entry under the sandbox but outside DIR: its mode and content (a link's target)."""
        return _state(self.root, skip=self.out)


def _state(root: Path, skip: Path) -> dict[str, tuple[int, bytes]]:
    found = {}
    for path in sorted(root.rglob("*")):
        if path == skip or skip in path.parents:
            continue
        mode = path.lstat().st_mode
        if path.is_symlink():
            content = os.readlink(path).encode()
        elif path.is_file():
            content = path.read_bytes()
        else:
            content = b""
        found[str(path.relative_to(root))] = (mode, content)
    return found


def _profiles(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name != MARKER)


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    # An empty user catalog of our own, so the machine's does not change the candidates.
    (tmp_path / "config").mkdir()
    env = {"SPECDEPLOY_CATALOG": str(tmp_path / "config" / "catalog.json")}
    return Sandbox(root=tmp_path, out=tmp_path / "out", env=env)


@pytest.fixture(scope="module")
def names(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The files a plain run writes, from a run into a directory of its own."""
    probe = tmp_path_factory.mktemp("probe")
    env = {"SPECDEPLOY_CATALOG": str(probe / "catalog.json")}
    run = specdeploy(
        "suggest", TARGET, "--offline", "--write", str(probe / "out"), env=env, cwd=probe
    )
    assert run.returncode == 0, run.output
    written = _profiles(probe / "out")
    assert written and all(name.endswith(".yaml") for name in written)
    return written


def test_a_dir_that_is_a_symbolic_link_is_refused_and_nothing_is_written_through(
    sandbox: Sandbox,
) -> None:
    (sandbox.root / "elsewhere").mkdir()  # empty: it would be accepted if named directly
    sandbox.out.symlink_to(sandbox.root / "elsewhere")
    before = _state(sandbox.root, skip=sandbox.root / "none")
    run = sandbox.suggest()
    assert run.returncode == 1, run.output
    assert f"--write {sandbox.out} is a symbolic link (to {sandbox.root / 'elsewhere'})" in (
        run.stderr
    )
    assert "why:" in run.stderr and "fix:" in run.stderr
    assert _state(sandbox.root, skip=sandbox.root / "none") == before  # the link too
    assert list((sandbox.root / "elsewhere").iterdir()) == []


def test_a_link_planted_in_an_earlier_output_is_replaced_not_written_through(
    sandbox: Sandbox, names: list[str]
) -> None:
    assert sandbox.suggest().returncode == 0
    precious = sandbox.root / "authorized_keys"
    precious.write_text("keep me\n")
    absent = sandbox.root / "absent.yaml"
    (sandbox.out / names[0]).unlink()
    (sandbox.out / names[0]).symlink_to(precious)
    (sandbox.out / names[-1]).unlink()
    (sandbox.out / names[-1]).symlink_to(absent)  # dangling: must not be created
    before = sandbox.outside()
    run = sandbox.suggest()
    assert run.returncode == 0, run.output
    assert precious.read_text() == "keep me\n" and not absent.exists()
    assert sandbox.outside() == before
    for name in (names[0], names[-1]):
        written = sandbox.out / name
        assert not written.is_symlink() and written.read_text().startswith("# Written by")
    assert _profiles(sandbox.out) == names


def test_a_users_file_of_the_same_name_is_refused_and_kept(
    sandbox: Sandbox, names: list[str]
) -> None:
    sandbox.out.mkdir()
    mine = sandbox.out / names[0]
    mine.write_text("# my own tuned profile\n")
    before = _state(sandbox.root, skip=sandbox.root / "none")
    run = sandbox.suggest()
    assert run.returncode == 1, run.output
    assert f"--write {sandbox.out} holds files specdeploy did not write ({names[0]})" in (
        run.stderr
    )
    assert "why: suggest replaces the --write directory whole" in run.stderr
    assert MARKER in run.stderr and "fix:" in run.stderr
    assert mine.read_text() == "# my own tuned profile\n"
    assert _state(sandbox.root, skip=sandbox.root / "none") == before


def test_a_non_empty_foreign_directory_is_refused(sandbox: Sandbox) -> None:
    (sandbox.out / "notes").mkdir(parents=True)
    (sandbox.out / "notes" / "todo.txt").write_text("mine")
    (sandbox.out / ".hidden").write_text("mine too")
    (sandbox.out / "link").symlink_to(sandbox.root / "config")
    before = _state(sandbox.root, skip=sandbox.root / "none")
    run = sandbox.suggest()
    assert run.returncode == 1, run.output
    assert "holds files specdeploy did not write (.hidden, link, notes)" in run.stderr
    assert "fix: pass a new or empty directory for --write" in run.stderr
    assert _state(sandbox.root, skip=sandbox.root / "none") == before


def test_a_render_directory_is_not_a_suggest_directory(sandbox: Sandbox) -> None:
    sandbox.out.mkdir()
    (sandbox.out / ".specdeploy-render").write_text("")
    (sandbox.out / "launch.json").write_text("{}\n")
    before = _state(sandbox.root, skip=sandbox.root / "none")
    run = sandbox.suggest()
    assert run.returncode == 1 and "holds files specdeploy did not write" in run.stderr
    assert _state(sandbox.root, skip=sandbox.root / "none") == before


def test_a_rerun_into_its_own_output_replaces_it(sandbox: Sandbox, names: list[str]) -> None:
    sandbox.out.mkdir()  # an empty directory is accepted
    assert sandbox.suggest().returncode == 0
    assert _profiles(sandbox.out) == names and (sandbox.out / MARKER).is_file()
    (sandbox.out / "stale.yaml").write_text("from an earlier run\n")  # added by hand: replaced
    before = sandbox.outside()
    run = sandbox.suggest("--engine", "sglang")
    assert run.returncode == 0, run.output
    rewritten = _profiles(sandbox.out)
    assert rewritten and all("-sglang-" in name for name in rewritten)  # nothing left of vllm
    assert "stale.yaml" not in rewritten and (sandbox.out / MARKER).is_file()
    assert sandbox.outside() == before  # no temporary or previous directory left beside it
    checked = specdeploy(
        "validate", str(sandbox.out / rewritten[0]), "--offline", env=sandbox.env, cwd=sandbox.root
    )
    assert checked.returncode == 0, checked.output


@pytest.mark.parametrize("earlier", [False, True], ids=["new-dir", "rerun"])
def test_a_full_disk_is_exit_1_with_no_partial_profile_and_no_temporary_file(
    sandbox: Sandbox, earlier: bool
) -> None:
    if earlier:
        assert sandbox.suggest().returncode == 0
    kept = _state(sandbox.out, skip=sandbox.out / "none") if earlier else None
    before = sandbox.outside()
    run = sandbox.suggest(full_disk=True)
    assert run.returncode == 1, run.output
    assert (
        f"cannot write the suggested profiles to {sandbox.out}: No space left on device"
        in run.stderr
    )
    assert "why: suggest --write writes one profile per option there" in run.stderr
    assert "fix: pass --write a new or empty directory you can write to" in run.stderr
    assert "wrote" not in run.stdout
    assert sandbox.outside() == before  # no temporary directory or file beside DIR
    if earlier:
        assert _state(sandbox.out, skip=sandbox.out / "none") == kept  # the earlier output
    else:
        assert not sandbox.out.exists()


def test_the_full_disk_simulation_reaches_render_too(sandbox: Sandbox, tmp_path: Path) -> None:
    """The same writer: render --out on a full disk says the same, and leaves nothing."""
    profiles = Path(__file__).resolve().parents[2] / "profiles"
    profile = tmp_path / "config" / "p.yaml"
    shutil.copy(profiles / "vllm-qwen3-4b-draft.yaml", profile)
    before = sandbox.outside()
    run = specdeploy(
        "render",
        str(profile),
        "--out",
        str(sandbox.out),
        "--offline",
        env=sandbox.env,
        cwd=sandbox.root,
        full_disk=True,
    )
    assert run.returncode == 1, run.output
    assert f"cannot write the render to {sandbox.out}: No space left on device" in run.stderr
    assert "fix:" in run.stderr and "Traceback" not in run.output
    assert sandbox.outside() == before and not sandbox.out.exists()
