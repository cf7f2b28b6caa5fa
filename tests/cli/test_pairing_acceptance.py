"""Issue 4's acceptance cases end to end: a profile file in, the CLI's exit code and rule out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from orchestrator.cli import cli
from tests.support import REPO_ROOT, write_profile

FIX = REPO_ROOT / "tests" / "fixtures" / "checkpoints"
VLLM = {"name": "vllm", "version": "0.32.0"}
SGLANG = {"name": "sglang", "version": "0.5.23"}
TRTLLM = {"name": "trtllm", "version": "1.2.0"}
HARDWARE = {"gpu": "H100-80GB"}
SERVING = {"max_model_len": 4096, "max_concurrency": 4}


def validate(tmp_path: Path, **sections: Any) -> tuple[Result, dict[str, Any]]:
    sections.setdefault("hardware", HARDWARE)
    sections.setdefault("serving", SERVING)
    path = write_profile(tmp_path, **sections)
    result = CliRunner().invoke(cli, ["validate", str(path), "--format", "json", "--offline"])
    assert "Traceback" not in result.output
    return result, json.loads(result.stdout)


def rules(document: dict[str, Any], severity: str = "error") -> set[str]:
    return {f["rule"] for f in document["findings"] if f["severity"] == severity}


def draft(model: str, method: str = "draft_model", k: int = 4) -> dict[str, Any]:
    return {"method": method, "model": str(FIX / model), "num_speculative_tokens": k}


class TestDraftVocabulary:
    def test_qwen25_padding_is_refused_by_vllm(self, tmp_path: Path) -> None:
        result, doc = validate(
            tmp_path,
            engine=VLLM,
            target={"model": str(FIX / "qwen2.5-7b-instruct")},
            proposer=draft("qwen2.5-1.5b-instruct"),
        )
        assert result.exit_code == 4
        assert "pairing.draft-vocab-size" in rules(doc)

    def test_qwen25_padding_is_accepted_by_sglang_before_0_5_15(self, tmp_path: Path) -> None:
        result, doc = validate(
            tmp_path,
            engine={**SGLANG, "version": "0.5.14"},
            target={"model": str(FIX / "qwen2.5-7b-instruct")},
            proposer=draft("qwen2.5-1.5b-instruct"),
        )
        assert not {r for r in rules(doc) if r.startswith("pairing.")}, doc["findings"]
        assert result.exit_code == 0

    def test_qwen25_padding_is_refused_by_sglang_from_0_5_15(self, tmp_path: Path) -> None:
        result, doc = validate(
            tmp_path,
            engine={**SGLANG, "version": "0.5.23"},
            target={"model": str(FIX / "qwen2.5-7b-instruct")},
            proposer=draft("qwen2.5-1.5b-instruct"),
        )
        assert result.exit_code == 4
        assert "pairing.draft-vocab-size" in rules(doc)

    def test_same_size_different_tokens(self, tmp_path: Path) -> None:
        result, doc = validate(
            tmp_path,
            engine=VLLM,
            target={"model": str(FIX / "llama2-style-32k")},
            proposer=draft("mistral-style-32k"),
        )
        assert result.exit_code == 4
        assert "pairing.draft-tokenizer" in rules(doc)


class TestEagleHeads:
    def test_head_for_another_hidden_size(self, tmp_path: Path) -> None:
        result, doc = validate(
            tmp_path,
            engine=VLLM,
            target={"model": str(FIX / "llama-3.1-70b-instruct")},
            proposer=draft("eagle3-llama3.1-8b", "eagle3"),
            hardware={"gpu": "H100-80GB", "tensor_parallel_size": 4},
        )
        assert result.exit_code == 4
        assert "pairing.eagle-head-hidden-size" in rules(doc)

    def test_eagle1_head_on_the_eagle3_path(self, tmp_path: Path) -> None:
        result, doc = validate(
            tmp_path,
            engine=VLLM,
            target={"model": str(FIX / "llama-3.1-8b-instruct")},
            proposer=draft("eagle1-llama3.1-8b", "eagle3"),
        )
        assert result.exit_code == 4
        assert "pairing.eagle-generation" in rules(doc)

    def test_eagle1_head_on_tensorrt_llm(self, tmp_path: Path) -> None:
        result, doc = validate(
            tmp_path,
            engine=TRTLLM,
            target={"model": str(FIX / "llama-3.1-8b-instruct")},
            proposer=draft("eagle1-llama3.1-8b", "eagle3"),
        )
        assert result.exit_code == 4
        assert "engine.trtllm-eagle-checkpoint" in rules(doc)

    def test_matching_head_passes(self, tmp_path: Path) -> None:
        result, doc = validate(
            tmp_path,
            engine=VLLM,
            target={"model": str(FIX / "llama-3.1-8b-instruct")},
            proposer=draft("eagle3-llama3.1-8b", "eagle3"),
        )
        assert result.exit_code == 0, doc["findings"]


class TestMtp:
    def test_model_without_mtp_layers(self, tmp_path: Path) -> None:
        result, doc = validate(
            tmp_path,
            engine=VLLM,
            target={"model": str(FIX / "qwen3-8b")},
            proposer={"method": "mtp", "num_speculative_tokens": 1},
        )
        assert result.exit_code == 4
        assert "pairing.mtp-layers" in rules(doc)

    def test_declared_layers_without_weights(self, tmp_path: Path) -> None:
        result, doc = validate(
            tmp_path,
            engine=VLLM,
            target={"model": str(FIX / "mimo-7b-no-mtp-weights")},
            proposer={"method": "mtp", "num_speculative_tokens": 1},
        )
        assert result.exit_code == 4
        assert "pairing.mtp-weights" in rules(doc)


class TestResolution:
    def test_hub_id_only_in_the_hf_cache_resolves_offline(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("HF_HUB_CACHE", str(REPO_ROOT / "tests" / "fixtures" / "hf_cache"))
        result, doc = validate(
            tmp_path,
            engine=VLLM,
            target={"model": "specdeploy-fixtures/tiny-qwen3"},
            proposer={"method": "ngram", "num_speculative_tokens": 3},
        )
        assert "checkpoint.unresolved" not in rules(doc)
        assert result.exit_code in (0, 5), doc["findings"]

    def test_unknown_hub_id_offline_says_how_to_fix(self, tmp_path: Path) -> None:
        result, doc = validate(
            tmp_path,
            engine=VLLM,
            target={"model": "acme/no-such-model"},
            proposer={"method": "ngram", "num_speculative_tokens": 3},
        )
        assert result.exit_code == 4
        (finding,) = [f for f in doc["findings"] if f["rule"] == "checkpoint.unresolved"]
        assert "acme/no-such-model" in finding["what"]
        assert "huggingface-cli download" in finding["fix"] or "download" in finding["fix"]


def test_explain_pairing_rule_prints_what_why_and_source() -> None:
    result = CliRunner().invoke(cli, ["explain", "pairing.draft-tokenizer"])
    assert result.exit_code == 0
    assert "pairing.draft-tokenizer" in result.stdout
    assert "source:" in result.stdout
    assert len(result.stdout.splitlines()) >= 4
