"""render --out against a hostile or stale output directory (issue 16 §7): an earlier render
leaves nothing behind, a directory with other files or a symbolic link is refused, a link
planted inside an earlier render is not written through, and a write failure is exit 1."""

from __future__ import annotations

from pathlib import Path

from tests.hostile.capped_cli import specdeploy
from tests.support import write_profile

DRAFT = {"method": "draft_model", "model": "Qwen/Qwen3-0.6B", "num_speculative_tokens": 4}


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def test_a_baseline_rendered_earlier_does_not_come_back(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with_baseline = write_profile(tmp_path, "a.yaml", proposer=DRAFT, deploy={"baseline": True})
    without = write_profile(tmp_path, "b.yaml", proposer=DRAFT, deploy={"baseline": False})
    assert specdeploy("render", str(with_baseline), "--out", str(out), "--offline").returncode == 0
    assert any("baseline" in name for name in _files(out / "k8s"))
    assert specdeploy("render", str(without), "--out", str(out), "--offline").returncode == 0
    assert not (out / "baseline").exists()
    assert not any("baseline" in name for name in _files(out / "k8s"))  # `kubectl apply -f`


def test_a_directory_with_other_files_is_refused_with_exit_1(tmp_path: Path) -> None:
    profile = write_profile(tmp_path, proposer=DRAFT)
    run = specdeploy("render", str(profile), "--out", str(tmp_path), "--offline")
    assert run.returncode == 1, run.output
    assert "holds files specdeploy did not write (p.yaml)" in run.stderr
    assert "fix:" in run.stderr
    assert _files(tmp_path) == {"p.yaml"}


def test_a_symbolic_link_is_never_followed(tmp_path: Path) -> None:
    profile = write_profile(tmp_path, proposer=DRAFT)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "out").symlink_to(tmp_path / "elsewhere")
    run = specdeploy("render", str(profile), "--out", str(tmp_path / "out"), "--offline")
    assert run.returncode == 1 and "is a symbolic link" in run.stderr
    assert _files(tmp_path / "elsewhere") == set()


def test_a_link_planted_in_an_earlier_render_is_replaced_not_written_through(
    tmp_path: Path,
) -> None:
    profile = write_profile(tmp_path, proposer=DRAFT)
    out = tmp_path / "out"
    assert specdeploy("render", str(profile), "--out", str(out), "--offline").returncode == 0
    secret = tmp_path / "authorized_keys"
    secret.write_text("keep me\n")
    (out / "launch.json").unlink()
    (out / "launch.json").symlink_to(secret)
    assert specdeploy("render", str(profile), "--out", str(out), "--offline").returncode == 0
    assert secret.read_text() == "keep me\n"
    assert not (out / "launch.json").is_symlink() and '"argv"' in (out / "launch.json").read_text()


def test_a_write_failure_is_exit_1_and_writes_nothing(tmp_path: Path) -> None:
    profile = write_profile(tmp_path, proposer=DRAFT)
    blocked = tmp_path / "p.yaml" / "out"  # a file where a directory must go
    run = specdeploy("render", str(profile), "--out", str(blocked), "--offline")
    assert run.returncode == 1, run.output
    assert f"cannot write the render to {blocked}" in run.stderr and "fix:" in run.stderr
    assert _files(tmp_path) == {"p.yaml"}
