"""`specdeploy inspect`: facts and their origin, as text or JSON; exit 4 when unresolvable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.cli import cli

TESTS = Path(__file__).resolve().parents[2]
FIXTURES = TESTS / "fixtures" / "checkpoints"
HF_CACHE = TESTS / "fixtures" / "hf_cache"


def run(*args: str, **env: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["inspect", *args], env={"HF_HUB_OFFLINE": "1", **env})
    return result.exit_code, result.stdout, result.stderr


def test_local_eagle_head_as_text() -> None:
    code, out, _ = run(str(FIXTURES / "eagle3-llama3.1-8b"))
    assert code == 0
    assert "source:       local: " in out
    assert "EAGLE-3 (raw), built for hidden 4096, vocab 128256 -> draft 32000, d2t yes" in out
    assert "0.425 B parameters" in out and "not found:    tokenizer.json" in out


def test_catalog_model_as_json_names_its_sources() -> None:
    code, out, _ = run("Qwen/Qwen3-8B", "--format", "json", "--offline")
    doc = json.loads(out)
    assert code == 0 and doc["source"] == "catalog" and doc["sources"]
    assert doc["tokenizer_family"] == "qwen3" and doc["derived"]["max_context"] == 40960


def test_hf_cache_model_with_revision(monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, _ = run(
        "specdeploy-fixtures/tiny-qwen3", "--format", "json", HF_HUB_CACHE=str(HF_CACHE)
    )
    doc = json.loads(out)
    assert code == 0 and doc["source"] == "hf-cache" and len(doc["revision"]) == 40


def test_unknown_model_exits_4_with_a_fix_and_no_traceback() -> None:
    code, out, err = run("acme/no-such-model", "--offline")
    assert code == 4 and out == ""
    assert "could not be resolved" in err and "fix: download the metadata" in err
    assert "huggingface-cli download acme/no-such-model" in err and "Traceback" not in err
