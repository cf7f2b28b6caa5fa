"""Real vLLM on CPU, started by `specdeploy run --local` from the tiny example profiles.

One server at a time (2 cores, about 3 GB each), --enforce-eager, short greedy outputs. Facts
asserted (shared/reference/feasibility_vllm.md §5): speculative servers expose growing
`vllm:spec_decode_*` counters; a draft identical to the target accepts every drafted token;
greedy text is the same with and without speculation (speculative decoding is lossless).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from orchestrator.dev.tiny_models import TinyModels
from tests.e2e.local_run import run_command, specdeploy_run
from tests.e2e.servers import complete, server_env, spec_counters
from tests.support import LOCAL_PROFILES_DIR

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# Repeated spans give n-gram lookup something to match; words are in the tiny vocabulary.
PROMPTS = (
    "w1 w2 w3 w4 w5 w1 w2 w3 w4 w5 w1 w2 w3",
    "a b c d e f g a b c d e f g a b",
    "w10 w20 w30 w10 w20 w30 w10 w20",
)


def greedy(url: str) -> list[str]:
    return [complete(url, prompt, max_tokens=24) for prompt in PROMPTS]


@pytest.fixture(scope="module")
def baseline_text(
    tiny_models: TinyModels, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[str]]:
    """Greedy outputs of the target without speculation (tiny-baseline.yaml)."""
    tmp_path = tmp_path_factory.mktemp("baseline")
    with specdeploy_run(LOCAL_PROFILES_DIR / "tiny-baseline.yaml", tmp_path=tmp_path) as run:
        assert spec_counters(run.url) == {}  # no speculation, no counters
        yield greedy(run.url)


def test_ngram_drafts_and_keeps_greedy_text(
    baseline_text: list[str], tmp_path: Path, tiny_models: TinyModels
) -> None:
    with specdeploy_run(LOCAL_PROFILES_DIR / "tiny-ngram.yaml", tmp_path=tmp_path) as run:
        before = spec_counters(run.url)
        text = greedy(run.url)
        after = spec_counters(run.url)
    assert after["num_drafts"] > before.get("num_drafts", 0)
    assert after["num_draft_tokens"] > before.get("num_draft_tokens", 0)
    assert text == baseline_text


def test_self_draft_accepts_every_token_and_keeps_greedy_text(
    baseline_text: list[str], tmp_path: Path, tiny_models: TinyModels
) -> None:
    with specdeploy_run(LOCAL_PROFILES_DIR / "tiny-selfdraft.yaml", tmp_path=tmp_path) as run:
        text = greedy(run.url)
        counters = spec_counters(run.url)
    assert counters["num_draft_tokens"] > 0
    acceptance_rate = counters["num_accepted_tokens"] / counters["num_draft_tokens"]
    assert acceptance_rate == 1.0, counters
    assert text == baseline_text


def _profile(tmp_path: Path, name: str, **changes: object) -> Path:
    """A copy of tiny-draft.yaml with absolute model paths and top-level blocks replaced."""
    data = yaml.safe_load((LOCAL_PROFILES_DIR / "tiny-draft.yaml").read_text())
    data["target"]["model"] = str((LOCAL_PROFILES_DIR / data["target"]["model"]).resolve())
    data["proposer"]["model"] = str((LOCAL_PROFILES_DIR / data["proposer"]["model"]).resolve())
    data["metadata"]["name"] = name
    for key, value in changes.items():
        data[key] = {**data.get(key, {}), **value} if isinstance(value, dict) else value
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _run(profile: Path, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        run_command(profile, *extra),
        env=server_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_mismatched_draft_is_refused_before_launch(tiny_models: TinyModels, tmp_path: Path) -> None:
    profile = _profile(tmp_path, "tiny-mismatch", proposer={"model": str(tiny_models.bad_draft)})
    result = _run(profile, tmp_path)
    assert result.returncode == 4, result.stderr
    assert "pairing.draft-tokenizer" in result.stderr or "pairing.draft-vocab-size" in result.stderr
    assert "fix:" in result.stderr
    assert "starting vllm" not in result.stdout  # nothing was launched


def test_managed_flag_override_is_refused_before_launch(
    tiny_models: TinyModels, tmp_path: Path
) -> None:
    profile = _profile(tmp_path, "tiny-override", serving={"extra_args": ["--max-model-len", "64"]})
    result = _run(profile, tmp_path)
    assert result.returncode == 4, result.stderr
    assert "engine.managed-flag" in result.stderr
    assert "starting vllm" not in result.stdout


def test_engine_refusal_is_surfaced_readably(tiny_models: TinyModels, tmp_path: Path) -> None:
    """A context longer than the model's 4096 positions: vLLM itself refuses at start-up."""
    profile = _profile(tmp_path, "tiny-too-long", serving={"max_model_len": 8192})
    result = _run(profile, tmp_path, "--ignore", "serving.max-model-len")
    assert result.returncode == 6, result.stderr
    assert "vllm exited with code" in result.stderr
    assert "vllm said:" in result.stderr
    assert "max_model_len" in result.stderr
    assert "Traceback" not in result.stderr.split("last lines of its log")[0]
    assert "fix:" in result.stderr
