"""Tokenizer comparison (content first, documented family second) and verifier-name normalisation."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.checkpoint.catalog import catalog_info
from orchestrator.checkpoint.compare import compare_tokenizers, normalise_model_name
from orchestrator.checkpoint.info import CheckpointInfo
from orchestrator.checkpoint.reading import read_checkpoint_dir

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "checkpoints"


def local(slug: str) -> CheckpointInfo:
    path = FIXTURES / slug
    return read_checkpoint_dir(path, ref=slug, source="local", location=str(path), revision=None)


def hub(model: str) -> CheckpointInfo:
    info = catalog_info(model)
    assert info is not None
    return info


@pytest.mark.parametrize(
    ("target", "draft", "verdict", "basis"),
    [
        ("qwen2.5-7b-instruct", "qwen2.5-1.5b-instruct", "same", "content"),
        ("qwen3-8b", "qwen2.5-1.5b-instruct", "related", "content"),
        ("llama2-style-32k", "mistral-style-32k", "different", "content"),
        ("qwen3-8b", "eagle3-llama3.1-8b", "unknown", "none"),
    ],
)
def test_by_file_content(target: str, draft: str, verdict: str, basis: str) -> None:
    result = compare_tokenizers(local(target), local(draft))
    assert (result.verdict, result.basis) == (verdict, basis)


@pytest.mark.parametrize(
    ("target", "draft", "verdict"),
    [
        ("Qwen/Qwen3-4B-Thinking-2507", "Qwen/Qwen3-0.6B", "same"),
        ("Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-0.5B-Instruct", "same"),
        ("Qwen/Qwen3-8B", "Qwen/Qwen2.5-1.5B-Instruct", "related"),
        ("meta-llama/Llama-3.1-70B-Instruct", "meta-llama/Llama-3.2-1B-Instruct", "same"),
        ("openai/gpt-oss-120b", "Qwen/Qwen3-0.6B", "different"),
    ],
)
def test_by_documented_family(target: str, draft: str, verdict: str) -> None:
    result = compare_tokenizers(hub(target), hub(draft))
    assert (result.verdict, result.basis) == (verdict, "family")
    assert "not file content" in result.detail


def test_content_and_family_cannot_be_mixed() -> None:
    result = compare_tokenizers(local("qwen3-8b"), hub("Qwen/Qwen3-0.6B"))
    assert result.verdict == "unknown" and "only by documented family" in result.detail


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("meta-llama/Llama-3.1-8B-Instruct", ("meta-llama", "llama-3.1-8b-instruct")),
        (
            "/proving-grounds/machine/hf_downloads/meta-llama/Llama-3.1-8B-Instruct",
            ("meta-llama", "llama-3.1-8b-instruct"),
        ),
        ("RedHatAI/Llama-3.1-8B-Instruct-FP8-dynamic", ("redhatai", "llama-3.1-8b-instruct")),
        ("Qwen/Qwen3-8B-AWQ", ("qwen", "qwen3-8b")),
        ("org/Model-quantized.w4a16", ("org", "model")),
        (
            "mistralai/Mistral-Large-3-675B-Instruct-2512-NVFP4",
            ("mistralai", "mistral-large-3-675b-instruct-2512"),
        ),
        ("./llama/", (None, "llama")),
    ],
)
def test_normalise_model_name(name: str, expected: tuple[str | None, str]) -> None:
    assert normalise_model_name(name) == expected
