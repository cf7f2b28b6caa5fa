"""The user catalog: where it lives, what a recorded checkpoint keeps, and its rank in resolution."""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import cast

import pytest

from orchestrator.checkpoint.catalog import answering_catalog, user_store
from orchestrator.checkpoint.catalog.user import (
    record,
    take_warnings,
    user_catalog_entries,
    user_catalog_info,
    user_catalog_path,
)
from orchestrator.checkpoint.files import read_json_object
from orchestrator.checkpoint.info import CheckpointInfo, Unresolved
from orchestrator.checkpoint.reading import read_checkpoint_dir
from orchestrator.checkpoint.resolution import CheckpointResolver
from orchestrator.errors import IncompatibleError, OutputError

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

    def test_a_damaged_file_is_not_written_over(self) -> None:
        user_catalog_path().write_text("{not json", encoding="utf-8")
        with pytest.raises(IncompatibleError) as raised:
            add("acme/x", "qwen3-8b")
        assert "cannot be read" in raised.value.what and "SPECDEPLOY_CATALOG" in raised.value.fix
        assert user_catalog_path().read_text(encoding="utf-8") == "{not json"

    def test_a_damaged_file_reads_as_empty_with_one_warning(self) -> None:
        user_catalog_path().write_text("{not json", encoding="utf-8")
        take_warnings()
        assert user_catalog_info("acme/x") is None and user_catalog_entries() == ()
        (warning,) = take_warnings()
        assert warning.what.startswith(f"user catalog {user_catalog_path()} is skipped: it is not")
        assert "SPECDEPLOY_CATALOG" in warning.fix


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
        assert any("is skipped" in place for place in missing.tried)

    def test_a_local_directory_still_comes_first(self, tmp_path: Path) -> None:
        add("qwen3-8b", "qwen3-0.6b")
        found = CheckpointResolver(base_dir=FIXTURES, offline=True).resolve(
            "target.model", "qwen3-8b", None
        )
        assert isinstance(found, CheckpointInfo) and found.source == "local"


def write_catalog(models: object) -> Path:
    path = user_catalog_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"format": 1, "models": models}), encoding="utf-8")
    return path


def good_entry() -> dict[str, object]:
    add("acme/good", "qwen3-0.6b")
    document = json.loads(user_catalog_path().read_text(encoding="utf-8"))
    return cast(dict[str, object], document["models"]["acme/good"])


class TestDamagedEntries:
    """Each damaged entry is skipped and said once, by name and file; the rest still resolves."""

    @pytest.mark.parametrize(
        ("damage", "said"),
        [
            (lambda e: "oops", "it is 'oops', not a JSON object"),
            (lambda e: [1, 2], "it is a list, not a JSON object"),
            (lambda e: {**e, "config": {"num_hidden_layers": 1e26}}, "`num_hidden_layers`"),
            (lambda e: {**e, "config": "x"}, "`config` is 'x', not an object"),
            (lambda e: {"roles": ["target"]}, "it has no `config`"),
            (lambda e: {**e, "roles": "target"}, "`roles` is 'target', not a list of strings"),
            (lambda e: {**e, "roles": ["boss"]}, "`roles` holds 'boss'"),
            (lambda e: {**e, "weight_bytes": -1}, "`weight_bytes` is -1"),
            (lambda e: {**e, "tokenizer": {"fingerprint": 7}}, "`tokenizer.fingerprint` is 7"),
            (lambda e: {**e, "eagle": {"generation": "eagle9"}}, "`eagle.generation`"),
            (lambda e: {**e, "missing": 3}, "`missing` is 3"),
            (lambda e: {**e, "published_acceptance": [{}]}, "`published_acceptance[0].value`"),
        ],
    )
    def test_one_damaged_entry_hides_nothing_else(
        self, tmp_path: Path, damage: Callable[[dict[str, object]], object], said: str
    ) -> None:
        entry = good_entry()
        path = write_catalog({"acme/good": entry, "acme/bad": damage(entry)})
        take_warnings()
        assert [e.model for e in user_catalog_entries()] == ["acme/good"]
        assert user_catalog_info("acme/bad") is None
        resolver = CheckpointResolver(base_dir=tmp_path, offline=True, hf_cache=tmp_path / "hub")
        assert isinstance(resolver.resolve("target.model", "Qwen/Qwen3-8B", None), CheckpointInfo)
        assert isinstance(resolver.resolve("target.model", "acme/good", None), CheckpointInfo)
        bad = resolver.resolve("target.model", "acme/bad", None)
        assert isinstance(bad, Unresolved)
        assert any("entry 'acme/bad' is skipped" in t and said in t for t in bad.tried), bad.tried
        (warning,) = take_warnings()  # once, however often the catalog was read
        assert warning.what.startswith(f"user catalog {path}: entry 'acme/bad' is skipped")
        assert said in warning.what and warning.why and str(path) in warning.fix

    def test_a_name_the_hub_would_refuse_is_skipped(self) -> None:
        write_catalog({"a/..": good_entry(), "acme/ok": good_entry()})
        take_warnings()
        assert [e.model for e in user_catalog_entries()] == ["acme/ok"]
        (warning,) = take_warnings()
        assert "'a/..'" in warning.what and "--as" not in warning.fix

    @pytest.mark.parametrize("text", ["[]", '{"models": []}', "{", '"x"', "[" * 100_000])
    def test_a_damaged_file_is_one_warning(self, text: str) -> None:
        user_catalog_path().write_text(text, encoding="utf-8")
        take_warnings()
        assert user_catalog_entries() == () and user_catalog_entries() == ()
        (warning,) = take_warnings()
        assert warning.what.startswith(f"user catalog {user_catalog_path()} is skipped")

    def test_adding_keeps_a_damaged_entry_as_it_is(self) -> None:
        path = write_catalog({"acme/bad": "oops"})
        add("acme/new", "qwen3-0.6b")
        models = json.loads(path.read_text(encoding="utf-8"))["models"]
        assert models["acme/bad"] == "oops" and "acme/new" in models


class TestWriting:
    def test_the_mode_of_an_existing_catalog_is_kept(self) -> None:
        path = add("acme/a", "qwen3-0.6b")
        path.chmod(0o644)
        add("acme/b", "qwen3-0.6b")
        assert stat.S_IMODE(path.stat().st_mode) == 0o644
        path.chmod(0o640)
        add("acme/c", "qwen3-0.6b")
        assert stat.S_IMODE(path.stat().st_mode) == 0o640

    def test_a_new_catalog_follows_the_umask(self) -> None:
        previous = os.umask(0o027)
        try:
            path = add("acme/a", "qwen3-0.6b")
        finally:
            os.umask(previous)
        assert stat.S_IMODE(path.stat().st_mode) == 0o640

    def test_a_full_disk_is_an_output_error_and_leaves_nothing(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        path = add("acme/a", "qwen3-0.6b")
        before = path.read_bytes()

        def full(fd: int, data: object) -> int:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        monkeypatch.setattr(user_store.os, "write", full)
        with pytest.raises(OutputError) as raised:
            add("acme/b", "qwen3-0.6b")
        monkeypatch.undo()
        error = raised.value
        assert error.exit_code == 1 and "No space left on device" in error.what
        assert str(path) in error.what and error.why and "free space" in error.fix
        assert path.read_bytes() == before
        assert sorted(p.name for p in path.parent.iterdir()) == [
            "catalog.json",
            "catalog.json.lock",
        ]

    def test_the_write_is_a_rename_of_a_synced_file(self, monkeypatch: pytest.MonkeyPatch) -> None:
        synced: list[int] = []
        real_fsync = os.fsync
        monkeypatch.setattr(user_store.os, "fsync", lambda fd: synced.append(fd) or real_fsync(fd))
        path = add("acme/a", "qwen3-0.6b")
        assert len(synced) == 2  # the temporary file, then the directory
        assert json.loads(path.read_text(encoding="utf-8"))["models"].keys() == {"acme/a"}

    def test_a_link_planted_as_the_lock_file_is_not_followed(self, tmp_path: Path) -> None:
        secret = tmp_path / "authorized_keys"
        secret.write_text("keep me\n", encoding="utf-8")
        lock = user_catalog_path().with_name("catalog.json.lock")
        lock.symlink_to(secret)
        with pytest.raises(OutputError) as raised:
            add("acme/a", "qwen3-0.6b")
        assert str(lock) in raised.value.what and "fix:" not in raised.value.what
        assert secret.read_text(encoding="utf-8") == "keep me\n"
        assert not user_catalog_path().exists()
