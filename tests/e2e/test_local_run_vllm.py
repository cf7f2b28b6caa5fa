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
from orchestrator.engines import ENGINES
from tests.e2e.local_run import run_command, specdeploy_run
from tests.e2e.servers import complete, scrape, server_env, spec_counters
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
        before, samples_before = spec_counters(run.url), scrape(run.url)
        text = greedy(run.url)
        after, samples_after = spec_counters(run.url), scrape(run.url)
    assert after["num_drafts"] > before.get("num_drafts", 0)
    assert after["num_draft_tokens"] > before.get("num_draft_tokens", 0)
    assert text == baseline_text
    # what the operator's switch compares, read from vLLM's own /metrics: the requests' output
    # tokens (3 x 24, ignore_eos) beside their end-to-end latencies
    window = ENGINES["vllm"].metrics.serving(samples_before, samples_after)
    assert window is not None and window.finished == len(PROMPTS), window
    assert window.output_tokens == 24 * len(PROMPTS), window
    assert window.seconds_per_token == pytest.approx(window.busy_s / (24 * len(PROMPTS)))


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


def test_a_schedule_drafts_only_at_the_loads_it_speculates_at(
    baseline_text: list[str], tmp_path: Path, tiny_models: TinyModels
) -> None:
    """One request at a time is a batch of one: a schedule with k 0 there drafts nothing, the
    example's (k 4 there) drafts; the greedy text is the target's either way."""
    schedule = {"num_speculative_tokens_per_batch_size": [[1, 1, 0], [2, 4, 4]]}
    off = _profile(tmp_path, "tiny-schedule-off", proposer=schedule)
    with specdeploy_run(off, tmp_path=tmp_path) as run:
        text_off = greedy(run.url)
        counters_off = spec_counters(run.url)
    assert counters_off.get("num_draft_tokens", 0) == 0, counters_off
    assert text_off == baseline_text
    on = LOCAL_PROFILES_DIR / "tiny-draft-schedule.yaml"
    with specdeploy_run(on, tmp_path=tmp_path / "on") as run:
        text_on = greedy(run.url)
        counters_on = spec_counters(run.url)
    assert counters_on["num_draft_tokens"] > 0, counters_on
    assert text_on == baseline_text


def test_vllm_itself_refuses_the_schedule_the_rule_refuses(
    tiny_models: TinyModels, tmp_path: Path
) -> None:
    """engine.spec-schedule-valid refuses an overlap before launch (exit 4); with the rule
    ignored, vLLM starts and its engine core exits on the same condition (exit 6)."""
    schedule = {"num_speculative_tokens_per_batch_size": [[1, 2, 4], [2, 4, 2]]}
    profile = _profile(tmp_path, "tiny-schedule-overlap", proposer=schedule)
    refused = _run(profile, tmp_path)
    assert refused.returncode == 4, refused.stderr
    condition = "Batch-size ranges must be non-overlapping and sorted."
    assert "engine.spec-schedule-valid" in refused.stderr and condition in refused.stderr
    log = tmp_path / "engine.log"
    ignored = ("--ignore", "engine.spec-schedule-valid", "--timeout", "240", "--log-file", str(log))
    started = _run(profile, tmp_path, *ignored)
    assert started.returncode == 6, started.stderr[-3000:]
    # The engine core's own traceback: Scheduler.__init__ -> build_dynamic_sd_schedule_lookup.
    engine_log = log.read_text()
    assert f"ValueError: {condition}" in engine_log, engine_log[-3000:]
    assert "build_dynamic_sd_schedule_lookup" in engine_log
