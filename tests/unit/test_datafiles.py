"""Packaged YAML data files and their compiled JSON twins (orchestrator/datafiles.py)."""

from __future__ import annotations

from pathlib import Path

from orchestrator.datafiles import (
    compile_data_file,
    compiled_path,
    is_fresh,
    packaged_data_files,
    read_data_file,
)


def test_every_packaged_twin_is_fresh() -> None:
    stale = [str(p) for p in packaged_data_files() if not is_fresh(p)]
    assert not stale, f"compiled twins are stale for {stale}: run `specdeploy dev compile-data`"


def _data_file(tmp_path: Path, text: str) -> Path:
    source = tmp_path / "table.yaml"
    source.write_text(text, "utf-8")
    return source


def test_a_fresh_twin_gives_the_yaml_data_in_order(tmp_path: Path) -> None:
    source = _data_file(tmp_path, "# comment\nb: {x: 1.5, y: null}\na: [true, '0.10']\n")
    compile_data_file(source)
    data = read_data_file(source)
    assert data == {"b": {"x": 1.5, "y": None}, "a": [True, "0.10"]}
    assert list(data) == ["b", "a"]
    assert is_fresh(source)


def test_an_edited_yaml_wins_over_its_stale_twin(tmp_path: Path) -> None:
    source = _data_file(tmp_path, "limit: 1\n")
    compile_data_file(source)
    source.write_text("limit: 2\n", "utf-8")
    assert read_data_file(source) == {"limit": 2}
    assert not is_fresh(source)


def test_a_missing_or_corrupt_twin_falls_back_to_the_yaml(tmp_path: Path) -> None:
    source = _data_file(tmp_path, "limit: 3\n")
    assert read_data_file(source) == {"limit": 3}
    compiled_path(source).write_text("{not json", "utf-8")
    assert read_data_file(source) == {"limit": 3}
    assert not is_fresh(source)


def test_a_twin_that_json_cannot_represent_exactly_is_not_fresh(tmp_path: Path) -> None:
    # JSON object keys are strings: a YAML integer key would come back as "1".
    source = _data_file(tmp_path, "1: one\n")
    compile_data_file(source)
    assert not is_fresh(source)
