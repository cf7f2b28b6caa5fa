"""Property: suggest and validate never contradict each other. Every profile `suggest --write`
writes, for any catalog target, GPU and engine, passes `validate` with exit 0."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.checkpoint.catalog import catalog_entries
from orchestrator.engines.names import ENGINE_NAMES, EngineName
from orchestrator.plan.build import load_and_plan
from orchestrator.suggest.build import suggest
from orchestrator.suggest.types import SuggestRequest
from orchestrator.suggest.write import write_profiles

TARGETS = sorted(e.model for e in catalog_entries() if "target" in e.roles)
GPUS = ("H100-80GB", "A100-80GB", "H200", "L40S", "B200")


def written_profiles_validate(request: SuggestRequest) -> int:
    """Write every option, validate each file as `specdeploy validate --offline` does; returns
    how many were checked."""
    found = suggest(request)
    with tempfile.TemporaryDirectory() as directory:
        written = write_profiles(found, Path(directory), "specdeploy suggest (test)")
        for rank, path in written.items():
            result = load_and_plan(path, offline=True)
            errors = [f"{f.rule}: {f.what}" for f in result.errors]
            assert result.exit_code() == 0, f"{path.name}: {errors}"
            option = found.options[rank - 1]
            assert result.profile == option.plan.profile.model_copy(
                update={"target": result.profile.target, "proposer": result.profile.proposer}
            )
            assert result.profile.proposer.num_speculative_tokens == option.num_speculative_tokens
    return len(written)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
@given(
    target=st.sampled_from(TARGETS),
    gpu=st.sampled_from(GPUS),
    engine=st.sampled_from(ENGINE_NAMES),
    concurrency=st.sampled_from((1, 16, 64)),
)
def test_every_written_option_validates(
    target: str, gpu: str, engine: EngineName, concurrency: int
) -> None:
    request = SuggestRequest(
        target, gpu=gpu, engines=(engine,), concurrency=concurrency, offline=True
    )
    written_profiles_validate(request)


@pytest.mark.parametrize(
    "target,gpu",
    [
        ("meta-llama/Llama-3.1-8B-Instruct", "H100-80GB"),
        ("meta-llama/Llama-3.3-70B-Instruct", "H100-80GB"),
        ("Qwen/Qwen3-8B", "H100-80GB"),
        ("Qwen/Qwen3-32B", "H100-80GB"),
        ("deepseek-ai/DeepSeek-R1", "H200"),
        ("openai/gpt-oss-120b", "H100-80GB"),
        ("Qwen/Qwen3-Next-80B-A3B-Instruct", "H100-80GB"),
    ],
)
def test_the_acceptance_targets_on_every_engine(target: str, gpu: str) -> None:
    request = SuggestRequest(target, gpu=gpu, engines=ENGINE_NAMES, offline=True)
    assert written_profiles_validate(request) >= 3
