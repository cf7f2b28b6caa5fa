"""render --out DIR: the directory is replaced whole (no stale files), only when specdeploy wrote
it or it is empty, never through a symbolic link, and a failed write leaves the old render."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.deploy.dry_run_files import MARKER, write_file, write_files
from orchestrator.errors import EXIT_OTHER, OutputError

FIRST = {"launch.json": "{}\n", "baseline/launch.json": "{}\n", "k8s/service-x-baseline.yaml": "a"}
SECOND = {"launch.json": '{"v": 2}\n', "k8s/service-x.yaml": "b"}


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


class TestWriteFiles:
    def test_a_new_directory_gets_the_files_and_the_marker(self, tmp_path: Path) -> None:
        written = write_files(FIRST, tmp_path / "a" / "out")
        assert _tree(tmp_path / "a" / "out") == {*FIRST, MARKER}
        assert written == [tmp_path / "a" / "out" / r for r in sorted(FIRST)]

    def test_a_second_render_leaves_nothing_of_the_first(self, tmp_path: Path) -> None:
        out = tmp_path / "out"
        write_files(FIRST, out)
        write_files(SECOND, out)
        assert _tree(out) == {*SECOND, MARKER}  # no stale baseline for `kubectl apply -f`
        assert (out / "launch.json").read_text() == '{"v": 2}\n'
        assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no temporary left

    def test_an_empty_directory_is_used(self, tmp_path: Path) -> None:
        (tmp_path / "out").mkdir()
        write_files(SECOND, tmp_path / "out")
        assert _tree(tmp_path / "out") == {*SECOND, MARKER}

    def test_a_directory_with_other_files_is_refused_and_left_alone(self, tmp_path: Path) -> None:
        (tmp_path / "notes.txt").write_text("mine")
        with pytest.raises(OutputError) as caught:
            write_files(SECOND, tmp_path)
        assert caught.value.exit_code == EXIT_OTHER == 1
        assert "holds files specdeploy did not write (notes.txt)" in caught.value.what
        assert MARKER in caught.value.why and caught.value.fix
        assert _tree(tmp_path) == {"notes.txt"}

    def test_a_symbolic_link_is_refused_not_followed(self, tmp_path: Path) -> None:
        (tmp_path / "real").mkdir()
        (tmp_path / "link").symlink_to(tmp_path / "real")
        with pytest.raises(OutputError, match="is a symbolic link"):
            write_files(SECOND, tmp_path / "link")
        assert _tree(tmp_path / "real") == set()

    def test_links_inside_an_earlier_render_are_replaced_not_written_through(
        self, tmp_path: Path
    ) -> None:
        outside = tmp_path / "precious.txt"
        outside.write_text("keep")
        out = tmp_path / "out"
        write_files(FIRST, out)
        (out / "launch.json").unlink()
        (out / "launch.json").symlink_to(outside)
        (out / "k8s").rename(tmp_path / "k8s-elsewhere")
        (out / "k8s").symlink_to(tmp_path / "k8s-elsewhere")
        write_files(SECOND, out)
        assert outside.read_text() == "keep"
        assert _tree(tmp_path / "k8s-elsewhere") == {"service-x-baseline.yaml"}
        assert not (out / "launch.json").is_symlink() and not (out / "k8s").is_symlink()

    def test_a_failed_write_keeps_the_previous_render(self, tmp_path: Path) -> None:
        out = tmp_path / "out"
        write_files(FIRST, out)
        clash = {"launch.json": "x", "launch.json/inner": "y"}  # a file where a directory goes
        with pytest.raises(OutputError, match=f"cannot write the render to {out}"):
            write_files(clash, out)
        assert _tree(out) == {*FIRST, MARKER}
        assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]

    def test_an_unwritable_place_is_an_output_error(self, tmp_path: Path) -> None:
        (tmp_path / "file").write_text("")
        with pytest.raises(OutputError) as caught:
            write_files(SECOND, tmp_path / "file" / "out")
        assert caught.value.exit_code == 1 and "Not a directory" in caught.value.what

    def test_paths_outside_the_directory_are_a_bug(self, tmp_path: Path) -> None:
        with pytest.raises(ValueError, match="outside its directory"):
            write_files({"../escape.yaml": "x"}, tmp_path / "out")


class TestWriteFile:
    def test_a_link_at_the_path_is_replaced_not_followed(self, tmp_path: Path) -> None:
        target = tmp_path / "elsewhere.yaml"
        target.write_text("keep")
        (tmp_path / "values.yaml").symlink_to(target)
        write_file(tmp_path / "values.yaml", "new")
        assert target.read_text() == "keep"
        assert (tmp_path / "values.yaml").read_text() == "new"
        assert not (tmp_path / "values.yaml").is_symlink()

    def test_a_directory_at_the_path_is_an_output_error(self, tmp_path: Path) -> None:
        (tmp_path / "values.yaml").mkdir()
        with pytest.raises(OutputError, match=r"values\.yaml"):
            write_file(tmp_path / "values.yaml", "new")
        assert [p.name for p in tmp_path.iterdir()] == ["values.yaml"]
