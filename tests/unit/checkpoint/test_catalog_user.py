"""The user catalog: where it lives, what a recorded checkpoint keeps, and its rank in resolution."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from orchestrator.checkpoint.catalog import answering_catalog
from orchestrator.checkpoint.catalog.user import (
    record,
    user_catalog_entries,
    user_catalog_info,
    user_catalog_path,
)
from orchestrator.checkpoint.files import read_json_object
from orchestrator.checkpoint.info import CheckpointInfo, Unresolved
from orchestrator.checkpoint.reading import read_checkpoint_dir
from orchestrator.checkpoint.resolution import CheckpointResolver
from orchestrator.errors import IncompatibleError

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "checkpoints"
# Facts that say where a CheckpointInfo came from rather than what the checkpoint is.
_ORIGIN = {"ref", "source", "location", "revision", "sources"}


def read(name: str) -> CheckpointInfo:
    path = FIXTURES / name
    return read_checkpoint_dir(path, ref=name, source="local", location=str(path), revision=None)


def add(model: str, fixture: str) -> Path:
    config = read_json_object(FIXTURES / fixture / "config.json") or {}
    path, _ = record(model, read(fixture), config, added_from=f"local directory {fixture}")
    return path


def facts(info: CheckpointInfo) -> dict[str, object]:
    return {k: v for k, v in dataclasses.asdict(info).items() if k not in _ORIGIN}


class TestWhereItLives:
    def test_the_environment_variable_wins(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("SPECDEPLOY_CATALOG", "/srv/team/catalog.json")
        monkeypatch.setenv("XDG_CONFIG_HOME", "/elsewhere")
        assert user_catalog_path() == Path("/srv/team/catalog.json")

    def test_then_the_xdg_config_dir_then_home(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.delenv("SPECDEPLOY_CATALOG")
        monkeypatch.setenv("XDG_CONFIG_HOME", "/xdg")
        assert user_catalog_path() == Path("/xdg/specdeploy/catalog.json")
        monkeypatch.delenv("XDG_CONFIG_HOME")
        monkeypatch.setenv("HOME", "/home/ci")
        assert user_catalog_path() == Path("/home/ci/.config/specdeploy/catalog.json")

    def test_a_missing_file_is_an_empty_catalog(self) -> None:
        assert not user_catalog_path().exists()
        assert user_catalog_entries() == () and user_catalog_info("acme/x") is None


class TestRecording:
    @pytest.mark.parametrize("fixture", ["qwen3-8b", "mimo-7b-base", "eagle3-llama3.1-8b"])
    def test_a_recorded_checkpoint_keeps_every_fact_of_its_files(self, fixture: str) -> None:
        add(f"acme/{fixture}", fixture)
        recorded = user_catalog_info(f"ACME/{fixture}")
        assert recorded is not None and recorded.ref == f"ACME/{fixture}"
        assert facts(recorded) == facts(read(fixture))
        assert recorded.source == "catalog" and answering_catalog(recorded) == "user"

    def test_recording_again_replaces_the_entry_whatever_its_case(self) -> None:
        add("acme/model", "qwen3-8b")
        path, replaced = record(
            "ACME/Model", read("qwen3-0.6b"), {"hidden_size": 1024}, added_from="x"
        )
        assert replaced and [e.model for e in user_catalog_entries()] == ["ACME/Model"]
        assert path == user_catalog_path() and not list(path.parent.glob(".catalog-*"))

    def test_the_file_is_written_where_the_variable_points(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("SPECDEPLOY_CATALOG", str(tmp_path / "team" / "catalog.json"))
        assert add("acme/model", "qwen3-8b") == tmp_path / "team" / "catalog.json"

    def test_a_damaged_file_is_a_user_error(self) -> None:
        user_catalog_path().write_text("{not json", encoding="utf-8")
        with pytest.raises(IncompatibleError) as raised:
            user_catalog_info("acme/x")
        assert "cannot be read" in raised.value.what and "SPECDEPLOY_CATALOG" in raised.value.fix


class TestResolution:
    def resolve(self, tmp_path: Path, model: str) -> CheckpointInfo | Unresolved:
        resolver = CheckpointResolver(base_dir=tmp_path, offline=True, hf_cache=tmp_path / "hub")
        return resolver.resolve("target.model", model, None)

    def test_the_user_catalog_ranks_above_the_built_in_one(self, tmp_path: Path) -> None:
        add("Qwen/Qwen3-8B", "qwen3-8b")
        found = self.resolve(tmp_path, "Qwen/Qwen3-8B")
        assert isinstance(found, CheckpointInfo) and answering_catalog(found) == "user"
        assert found.tokenizer is not None  # the built-in entry knows only a family

    def test_the_built_in_catalog_still_answers_the_rest(self, tmp_path: Path) -> None:
        add("acme/model", "qwen3-8b")
        found = self.resolve(tmp_path, "Qwen/Qwen3-0.6B")
        assert isinstance(found, CheckpointInfo) and answering_catalog(found) == "built-in"

    def test_a_damaged_file_is_reported_and_does_not_hide_the_built_in_one(
        self, tmp_path: Path
    ) -> None:
        user_catalog_path().write_text("[]", encoding="utf-8")
        assert isinstance(self.resolve(tmp_path, "Qwen/Qwen3-0.6B"), CheckpointInfo)
        missing = self.resolve(tmp_path, "acme/nothing")
        assert isinstance(missing, Unresolved)
        assert any("cannot be read" in place for place in missing.tried)

    def test_a_local_directory_still_comes_first(self, tmp_path: Path) -> None:
        add("qwen3-8b", "qwen3-0.6b")
        found = CheckpointResolver(base_dir=FIXTURES, offline=True).resolve(
            "target.model", "qwen3-8b", None
        )
        assert isinstance(found, CheckpointInfo) and found.source == "local"
