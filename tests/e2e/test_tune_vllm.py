"""The proof of `specdeploy tune` (issue 24 §5), on real vLLM 0.32.0 (CPU) servers of the layered
test bed: tune measures, writes a schedule, and the deployment it tunes is then served and benched
against the fixed arms it chose between.

1. `tune --local` starts the engines itself, one at a time as on a one-GPU host (the layered target
   alone as the baseline, then the target with the noisy draft at each k), from the profile's own
   launch. The profile caps a step at 64 tokens (`vllm.max_num_batched_tokens`, as a GPU's compute
   caps it), so a sequence verifying k drafts takes k + 1 of them: at concurrency 64 the
   speculative servers run a third or a fifth of the sequences the baseline runs at once, and lose
   on any CPU. Alone, the draft pays, by how much depending on the CPU (2-core EPYCs measured
   k=4 at 2.2x and, another, k=2 at 1.12x with k=4 at 0.98x; AMX Xeons about 2x). tune must
   schedule k > 0 from batch size 1 and k = 0 at concurrency 64.
2. The tuned profile (vLLM applies its `num_speculative_tokens_per_batch_size` per step), the
   baseline and the fixed k chosen alone are then served side by side by `run --local` and
   benched with `specdeploy bench`, tuned as the candidate. Alone, the tuned deployment is within
   noise of that k (its 95 % interval reaches 0.95: a systematic loss of more than 5 % beyond
   noise fails; the margin keeps repeated comparisons of equal servers from failing 1 run in 20)
   and drafts as much per output token. At concurrency 64 the schedule turns speculation off: it
   drafts at most 5 % of what the fixed k drafts per output token.

   What is measured there and not asserted: the tuned server at concurrency 64 drafts nothing
   and is still slower than the baseline (0.70x alone on a 2-core EPYC, 0.68x with other tests
   on the cores; 0.80x and 0.82x earlier with a schedule that still drafted a little there) and
   no faster than the fixed k. The reason is the budget itself: vLLM 0.32.0
   charges every request it schedules, drafting or not, one more budget token for the draft
   model's input (`max_num_new_slots_for_drafting` is 1 for draft_model,
   vllm/config/speculative.py; `input_budget -= num_new_tokens + draft_slots`,
   vllm/v1/core/sched/scheduler.py), so with k = 0 a 64-token step still holds 32 decodes where
   the baseline holds 64. Above the crossover on this test bed the baseline twin, not k = 0, is
   the fast arm: what the operator's `switch` routes to, and what `validate` says of the tuned
   profile (`engine.spec-schedule-off-budget`). The issue's "within noise of the best arm at
   every load" does not hold at 64 here; a budget far above max_num_seqs (a GPU's 8192) makes
   that charge small.

   The budget is not the only cost of k = 0. With a 128-token budget (2 x max_concurrency, so
   every sequence and its draft slot fit a step; tried on a 2-core EPYC, 2026-12-07) tune chose
   the same (k=4 alone at 1.89x, k=2 0.91x [0.87, 0.96] at 64, k=0 there), and the tuned server,
   drafting nothing at 64, was 0.77x [0.72, 0.82] of the baseline and 0.71x of the fixed k=2.
   vLLM 0.32.0 runs the drafter's first forward pass over every scheduled token even when the
   schedule says K = 0, "to keep the drafter KV cache in sync" (`propose`,
   vllm/v1/spec_decode/llm_base_proposer.py), so a k = 0 range costs a draft forward per step;
   on this test bed, whose steps are mostly per-forward overhead, that is a quarter of a step.

   N-gram lookup on the same target, 64-token budget (same day): it needs no draft slot
   (`max_num_new_slots_for_drafting` 0) and runs no forward, and tune chose k=4 alone (1.50x,
   acceptance length 2.25) and k=0 at 64 (k=2 0.89x). Served with five engines on the cores, the
   tuned server at 64 drafted nothing and was 0.91x [0.83, 0.99] of the baseline, 1.05x of k=4
   and 0.80x of k=2: closer, still not within noise. Its `propose` runs the numba lookup for
   every request even at K = 0 (vllm/v1/spec_decode/ngram_proposer.py).

The test prints tune's table, the benched one and the drafts. About 6 minutes on 2 cores.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.dev.layered import make_layered_models
from orchestrator.dev.tiny_models import DEFAULT_DIR
from tests.e2e.local_run import specdeploy_runs
from tests.e2e.servers import VLLM_PYTHON, complete, require_vllm, server_env, spec_counters
from tests.support import LOCAL_PROFILES_DIR, REPO_ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.scenario]

KS = (2, 4)
LOW, HIGH = 1, 64
#: Requests per arm: at concurrency 64, two waves (one would measure mostly the shared prefill).
REQUESTS = {LOW: 32, HIGH: 128}
WITHIN_NOISE = 0.95
WARM_UP = 4


def _specdeploy(
    *args: str, env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


def _profile(tmp_path: Path) -> Path:
    models = make_layered_models(REPO_ROOT / DEFAULT_DIR, python=str(VLLM_PYTHON))
    document = yaml.safe_load((LOCAL_PROFILES_DIR / "layered-tune.yaml").read_text())
    document["target"]["model"] = str(models.target)
    document["proposer"]["model"] = str(models.noisy_draft)
    path = tmp_path / "layered-tune.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def _fixed(tuned: dict[str, Any], k: int, path: Path, tuned_dir: Path) -> Path:
    """The tuned profile without its schedule: k drafts at every batch size (k = 0: none). Its
    relative model paths name directories from `tuned_dir`, where tune wrote it; they are made
    absolute, since this copy is written elsewhere (from a repo under /tmp, `..` past the root
    no longer lands back on it)."""
    document = json.loads(json.dumps(tuned))
    for block in ("target", "proposer"):
        model = document[block].get("model")
        if model and not Path(model).is_absolute():
            document[block]["model"] = str((tuned_dir / model).resolve())
    proposer = document["proposer"]
    del proposer["num_speculative_tokens_per_batch_size"]
    if k:
        proposer["num_speculative_tokens"] = k
    else:
        document["proposer"] = {"method": "none"}
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def _bench(tuned: str, other: str, load: int, out: Path, env: dict[str, str]) -> dict[str, float]:
    done = _specdeploy(
        "bench", "--candidate", tuned, "--baseline", other, "--concurrency", str(load),
        "--workload", "chat", "--requests", str(REQUESTS[load]), "--max-tokens", "24",
        "--ignore-eos", "--out", str(out),
        env=env, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    level: dict[str, Any] = json.loads((out / "bench.json").read_text())["levels"][0]
    speedup: dict[str, float] = level["speedup"]
    return speedup


def _text(ratio: dict[str, float]) -> str:
    return f"{ratio['value']:.2f}x [{ratio['low']:.2f}, {ratio['high']:.2f}]"


def test_tune_schedules_where_speculation_pays_and_the_tuned_deployment_is_the_best_arm(
    tmp_path: Path,
) -> None:
    require_vllm()
    env = server_env(tmp_path)
    profile, out = _profile(tmp_path), tmp_path / "tune"
    done = _specdeploy(
        "tune", str(profile), "--local", "--python", str(VLLM_PYTHON), "--engine-timeout", "300",
        "--k", ",".join(map(str, KS)), "--concurrency", f"{LOW},{HIGH}",
        "--requests", str(REQUESTS[HIGH]), "--max-tokens", "24", "--ignore-eos",
        "--out", str(out), "--offline",
        env=env, timeout=1200,
    )  # fmt: skip
    print(done.stdout)  # tune's measured table
    assert done.returncode == 0, done.stderr[-4000:]
    assert "Traceback" not in done.stderr
    assert done.stderr.count("starting vllm 0.32.0") == 1 + len(KS)
    result = json.loads((out / "tune.json").read_text())
    choice = {c["concurrency"]: c["k"] for c in result["choices"]}
    assert choice[LOW] in KS and choice[HIGH] == 0, result["choices"]
    for cell in result["cells"]:
        assert cell["acceptance_length"] is None or 1.0 < cell["acceptance_length"] <= cell["k"] + 1
        if cell["concurrency"] == HIGH and cell["outcome"] != "skipped":
            assert cell["outcome"] != "pays", cell  # the token budget: no k pays at 64

    tuned_path = out / "profile.yaml"
    tuned = yaml.safe_load(tuned_path.read_text())
    schedule = tuned["proposer"]["num_speculative_tokens_per_batch_size"]
    assert schedule[0][:1] == [1] and schedule[0][2] == choice[LOW], schedule
    assert schedule[-1][1:] == [HIGH, 0], schedule  # k = 0 up to max_concurrency
    checked = _specdeploy("validate", str(tuned_path), "--offline", env=env, timeout=120)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # and says what is measured below: k = 0 under this budget is not the baseline
    assert "warning engine.spec-schedule-off-budget" in checked.stdout, checked.stdout

    best_low = f"k={choice[LOW]}"
    arms = {"tuned": tuned_path}
    arms |= {
        arm: _fixed(tuned, int(arm[2:]), tmp_path / f"{arm}.yaml", tuned_path.parent)
        for arm in ("k=0", best_low)
    }
    with specdeploy_runs(list(arms.values()), tmp_path=tmp_path / "served") as runs:
        url = dict(zip(arms, (run.url for run in runs), strict=True))
        for server in url.values():  # a fresh engine's first requests are slower than the rest
            for _ in range(WARM_UP):
                complete(server, "Warm up: say something.", max_tokens=24)
        measured: dict[tuple[int, str], dict[str, float]] = {}
        drafts: dict[tuple[int, str], float] = {}
        for load, arm in ((LOW, best_low), (HIGH, "k=0"), (HIGH, best_low)):
            before = {name: _drafted(url[name]) for name in ("tuned", best_low)}
            out_dir = tmp_path / f"bench-{load}-{arm}"
            measured[load, arm] = _bench(url["tuned"], url[arm], load, out_dir, env)
            for name in {"tuned", arm} - {"k=0"}:
                drafts.setdefault((load, name), 0.0)
                drafts[load, name] += _drafted(url[name]) - before[name]
    print("tuned over each fixed arm (95 % interval):")
    for (load, arm), ratio in measured.items():
        print(f"  concurrency {load:3d}  tuned / {arm}: {_text(ratio)}")
    print("draft tokens per output token:")
    per_token = {key: n / _output_tokens(key, measured) for key, n in drafts.items()}
    for (load, name), rate in per_token.items():
        print(f"  concurrency {load:3d}  {name}: {rate:.2f}")
    # alone, the tuned deployment is the best fixed arm: it drafts as that k does, as fast
    assert measured[LOW, best_low]["high"] >= WITHIN_NOISE, measured
    assert per_token[LOW, "tuned"] == pytest.approx(per_token[LOW, best_low], rel=0.2)
    # at 64 the schedule turned speculation off: (almost) nothing drafted, where k drafts
    assert per_token[HIGH, "tuned"] <= 0.05 * per_token[HIGH, best_low], per_token


def _drafted(url: str) -> float:
    return spec_counters(url).get("num_draft_tokens", 0.0)


def _output_tokens(key: tuple[int, str], measured: dict[tuple[int, str], dict[str, float]]) -> int:
    """Output tokens the server `key[1]` produced in the benches at load `key[0]` (24 per
    request, --ignore-eos): the tuned one is the candidate of every bench at that load."""
    load, name = key
    benches = sum(1 for (at, _arm) in measured if at == load) if name == "tuned" else 1
    return benches * REQUESTS[load] * 24
