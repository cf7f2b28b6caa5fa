"""Resolution order: local directory, HF cache, hub (small files), catalog; never the network here."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.checkpoint import resolution
from orchestrator.checkpoint.info import CheckpointInfo, Unresolved
from orchestrator.checkpoint.resolution import CheckpointResolver

TESTS = Path(__file__).resolve().parents[2]
FIXTURES = TESTS / "fixtures" / "checkpoints"
HF_CACHE = TESTS / "fixtures" / "hf_cache"
CACHED = "specdeploy-fixtures/tiny-qwen3"
COMMIT = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c"


def resolver(
    tmp_path: Path, *, offline: bool = True, cache: Path | None = None
) -> CheckpointResolver:
    return CheckpointResolver(
        base_dir=tmp_path, offline=offline, hf_cache=cache or tmp_path / "hub"
    )


def test_local_directory_relative_to_the_base_dir() -> None:
    found = CheckpointResolver(base_dir=FIXTURES, offline=True).resolve(
        "target.model", "./qwen3-8b", None
    )
    assert isinstance(found, CheckpointInfo) and found.source == "local"
    assert found.location == str((FIXTURES / "qwen3-8b").resolve()) and found.ref == "./qwen3-8b"


def test_a_missing_path_is_unresolved_without_asking_the_hub(tmp_path: Path) -> None:
    found = resolver(tmp_path).resolve("proposer.model", "./models/draft", None)
    assert isinstance(found, Unresolved) and found.field == "proposer.model"
    assert len(found.tried) == 1 and "does not exist" in found.tried[0]


def test_a_file_is_not_a_checkpoint(tmp_path: Path) -> None:
    (tmp_path / "model.gguf").write_bytes(b"")
    found = resolver(tmp_path).resolve("target.model", "model.gguf", None)
    assert isinstance(found, Unresolved) and "is a file" in found.tried[0]


def test_hub_id_only_in_the_fixture_cache_resolves_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(HF_CACHE))
    found = CheckpointResolver(base_dir=tmp_path, offline=False).resolve(
        "target.model", CACHED, None
    )
    assert isinstance(found, CheckpointInfo) and found.source == "hf-cache"
    assert found.revision == COMMIT and found.hidden_size == 1024 and found.tokenizer is not None


def test_hf_home_layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(HF_CACHE, tmp_path / "home" / "hub")
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    found = CheckpointResolver(base_dir=tmp_path, offline=True).resolve(
        "target.model", CACHED, None
    )
    assert isinstance(found, CheckpointInfo) and found.source == "hf-cache"


def test_a_pinned_revision_must_be_in_the_cache(tmp_path: Path) -> None:
    pinned = resolver(tmp_path, cache=HF_CACHE).resolve("target.model", CACHED, COMMIT)
    assert isinstance(pinned, CheckpointInfo) and pinned.revision == COMMIT
    other = resolver(tmp_path, cache=HF_CACHE).resolve("target.model", CACHED, "f" * 40)
    assert isinstance(other, Unresolved)
    assert any("at revision ffff" in t for t in other.tried)


def test_unknown_hub_id_offline_says_where_it_looked(tmp_path: Path) -> None:
    found = resolver(tmp_path).resolve("target.model", "acme/no-such-model", None)
    assert isinstance(found, Unresolved)
    places = [t.split(":")[0] for t in found.tried]
    assert places == ["local directory", f"Hugging Face cache {tmp_path / 'hub'}", "hub",
                      f"user catalog {os.environ['SPECDEPLOY_CATALOG']}", "built-in catalog"]  # fmt: skip
    assert "skipped (offline" in found.tried[2]


def test_catalog_is_the_last_resort(tmp_path: Path) -> None:
    found = resolver(tmp_path).resolve("target.model", "Qwen/Qwen3-8B", None)
    assert isinstance(found, CheckpointInfo) and found.source == "catalog"
    assert found.tokenizer_family == "qwen3"


def test_hub_errors_become_a_tried_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(model: str, revision: str | None, cache: Path) -> Path:
        raise ConnectionError("Name or service not known")

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(resolution, "_hub_unreachable", lambda *args: None)
    monkeypatch.setattr(resolution, "_download_metadata", refuse)
    found = resolver(tmp_path, offline=False).resolve("proposer.model", "acme/x", None)
    assert isinstance(found, Unresolved)
    assert "hub: ConnectionError: Name or service not known" in found.tried


def test_an_unreachable_hub_is_probed_once_not_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def must_not_download(model: str, revision: str | None, cache: Path) -> Path:
        raise AssertionError("the hub client retries for ~25 s; the probe must stop it first")

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    # A closed loopback port stands in for an unreachable hub (no DNS, no traffic leaves).
    monkeypatch.setattr("huggingface_hub.constants.ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setattr(resolution, "_download_metadata", must_not_download)
    found = resolver(tmp_path, offline=False).resolve("target.model", "acme/x", None)
    assert isinstance(found, Unresolved)
    assert any(t.startswith("hub: unreachable (127.0.0.1:9") for t in found.tried)


def test_hub_download_reads_the_snapshot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    snapshot = tmp_path / "snapshots" / COMMIT

    def fake_download(model: str, revision: str | None, cache: Path) -> Path:
        shutil.copytree(FIXTURES / "mimo-7b-base", snapshot)
        return snapshot

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(resolution, "_hub_unreachable", lambda *args: None)
    monkeypatch.setattr(resolution, "_download_metadata", fake_download)
    found = resolver(tmp_path, offline=False).resolve("target.model", "acme/mimo", None)
    assert isinstance(found, CheckpointInfo) and found.source == "hub"
    assert found.revision == COMMIT and found.mtp_tensor_count == 7


def test_offline_flag_or_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "true")
    assert CheckpointResolver(base_dir=tmp_path, offline=False).offline
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    assert not CheckpointResolver(base_dir=tmp_path, offline=False).offline
    assert CheckpointResolver(base_dir=tmp_path, offline=True).offline


def test_importing_the_checkpoint_stage_does_not_import_the_hub_client() -> None:
    code = (
        "import sys, orchestrator.checkpoint.resolution, orchestrator.cli.inspect_cmd, "
        "orchestrator.compatibility.pairing_rules; "
        "print(sorted(m for m in ('huggingface_hub', 'tokenizers', 'safetensors') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_cache_without_refs_main_uses_its_only_snapshot(tmp_path: Path) -> None:
    shutil.copytree(HF_CACHE, tmp_path / "hub")
    (tmp_path / "hub" / "models--specdeploy-fixtures--tiny-qwen3" / "refs" / "main").unlink()
    found = resolver(tmp_path).resolve("target.model", CACHED, None)
    assert isinstance(found, CheckpointInfo) and found.revision == COMMIT
    assert "the only cached snapshot" in found.location


def test_a_pinned_revision_from_the_catalog_says_it_was_not_checked(tmp_path: Path) -> None:
    found = resolver(tmp_path).resolve("target.model", "Qwen/Qwen3-8B", "a" * 40)
    assert isinstance(found, CheckpointInfo) and found.source == "catalog"
    assert f"revision {'a' * 40} not checked" in found.location


def test_a_directory_without_config_is_unresolved(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    found = resolver(tmp_path).resolve("target.model", "./empty", None)
    assert isinstance(found, Unresolved) and "has no config.json" in found.tried[0]


def test_an_unreadable_local_checkpoint_is_reported_with_its_file_and_key(
    tmp_path: Path,
) -> None:
    (tmp_path / "head").mkdir()
    (tmp_path / "head" / "config.json").write_text('{"hidden_size": Infinity}')
    found = resolver(tmp_path).resolve("proposer.model", "./head", None)
    assert isinstance(found, Unresolved)
    assert (
        found.unreadable
        == f"{tmp_path / 'head' / 'config.json'}: `hidden_size` is Infinity, not a whole number"
    )
    assert found.tried[-1].startswith("local directory: unreadable: ")
    assert "repair or replace" in found.suggestion() and "--offline" not in found.suggestion()


def test_an_unreadable_cached_snapshot_stops_resolution(tmp_path: Path) -> None:
    shutil.copytree(HF_CACHE, tmp_path / "hub")
    snapshot = tmp_path / "hub" / "models--specdeploy-fixtures--tiny-qwen3" / "snapshots" / COMMIT
    config = snapshot / "config.json"
    config.unlink()  # a symlink into blobs/ in a real cache; a damaged copy here
    config.write_text('{"architectures": 5}')
    found = resolver(tmp_path).resolve("target.model", CACHED, None)
    assert isinstance(found, Unresolved) and found.unreadable is not None
    assert "`architectures` is 5" in found.unreadable
    assert found.tried[-1].startswith(f"Hugging Face cache {tmp_path / 'hub'}: unreadable")
    assert f"huggingface-cli download {CACHED} --force-download" in found.suggestion()


@pytest.mark.parametrize(
    ("model", "why"),
    [
        ("~no-such-user-here/models/x", "starts with ~user"),
        ("a" * 300, "neither an existing directory nor a hub id"),
        ("org/" + "b" * 200, "neither an existing directory nor a hub id"),
        ("./" + "c" * 300, "does not exist"),
        ("bad\x00path", "NUL"),
    ],
)
def test_names_no_filesystem_can_hold_are_unresolved(tmp_path: Path, model: str, why: str) -> None:
    found = resolver(tmp_path).resolve("target.model", model, None)
    assert isinstance(found, Unresolved) and why in found.tried[0]


def test_a_silent_hub_costs_one_deadline_for_all_models(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.hostile.loopback_servers import silent_server

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("SPECDEPLOY_HUB_TIMEOUT", "1")
    with silent_server() as url:
        monkeypatch.setattr("huggingface_hub.constants.ENDPOINT", url)
        hub = resolver(tmp_path, offline=False)
        target = hub.resolve("target.model", "acme/target", None)
        draft = hub.resolve("proposer.model", "acme/draft", None)
    for found in (target, draft):
        assert isinstance(found, Unresolved)
        silent = [t for t in found.tried if t.startswith("hub: did not answer")]
        assert silent and "within 1 s" in silent[0]
        assert "drop --offline" not in found.suggestion()
        assert "make the hub answer" in found.suggestion()


def test_a_hub_error_status_is_reported_not_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.hostile.loopback_servers import status_server

    def must_not_download(model: str, revision: str | None, cache: Path) -> Path:
        raise AssertionError("the hub client would retry a 503 with backoff")

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(resolution, "_download_metadata", must_not_download)
    with status_server(503) as (url, seen):
        monkeypatch.setattr("huggingface_hub.constants.ENDPOINT", url)
        found = resolver(tmp_path, offline=False).resolve("target.model", "acme/x", "v1")
    assert isinstance(found, Unresolved)
    assert any(t.startswith("hub: answered HTTP 503") for t in found.tried)
    assert seen == ["HEAD /acme/x/resolve/v1/config.json"]


def test_a_download_that_never_ends_is_cut_at_the_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    release = threading.Event()

    def hangs(model: str, revision: str | None, cache: Path) -> Path:
        release.wait(30)  # a hub that answers HEAD, then drips the file forever
        raise TimeoutError("released")

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("SPECDEPLOY_HUB_TIMEOUT", "0.5")
    monkeypatch.setattr(resolution, "_hub_unreachable", lambda *args: None)
    monkeypatch.setattr(resolution, "_download_metadata", hangs)
    try:
        found = resolver(tmp_path, offline=False).resolve("target.model", "Qwen/Qwen3-8B", None)
    finally:
        release.set()
    assert isinstance(found, CheckpointInfo) and found.source == "catalog"  # the next place
