"""`specdeploy tune` against loopback servers whose costs place each k's crossover.

One server per draft length at 127.0.1.<k> on one port (so `--endpoint-per-k` is a real URL
template), plus the baseline. A server with k commits k + 1 tokens per step (every draft token
accepted) and its step time grows with the requests in it, faster for longer drafts:

    per output token        concurrency 1   4               8
    baseline (25 ms)        25 ms           25 ms           25 ms
    k=1 (30 ms, 75 over 4)  15 ms (1.7x)    15 ms (1.7x)    37.5 ms (0.67x)
    k=3 (40 ms, 150 over 1) 10 ms (2.5x)    37.5 ms (0.67x) not measured: it lost at 4 already

so the choice is k=3 at 1, k=1 at 4 and the baseline (k=0) at 8. The steps are long beside what a
loaded machine spends on each streamed chunk (the servers and tune share one interpreter here):
with 10 ms baseline steps, a CI run under load measured k=1 paying at 8.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from orchestrator.bench.stats import Ratio
from orchestrator.cli import cli
from orchestrator.tune.choose import Cell, Choice, choose, crossover, prune, schedule
from tests.support import REPO_ROOT
from tests.unit.bench.loopback import Behaviour, LoopbackServer

KS = (1, 3)
STEP = {0: (0.025, 99, 0.025), 1: (0.030, 4, 0.075), 3: (0.040, 1, 0.150)}
"""k -> (step seconds up to a number of requests in the server, that number, step seconds above):
a verifier whose batch is full. Steps, not a smooth growth, so each cell is far from even (a
smooth growth measured k=1 losing at 4 on a loaded CI machine)."""


def _step(k: int) -> Any:
    low, up_to, high = STEP[k]
    return lambda active: low if active <= up_to else high


@pytest.fixture
def servers() -> Iterator[tuple[str, str]]:
    """(endpoint template, baseline URL)."""
    with socket.socket() as probe:
        probe.bind(("127.0.1.1", 0))
        port = probe.getsockname()[1]
    with ExitStack() as stack:
        for k in KS:
            behaviour = Behaviour(
                step_delay=_step(k), tokens_per_step=k + 1, draft_tokens_per_step=k
            )
            stack.enter_context(LoopbackServer(behaviour, host=f"127.0.1.{k}", port=port))
        base = stack.enter_context(LoopbackServer(Behaviour(step_delay=_step(0))))
        yield f"http://127.0.1.{{k}}:{port}", base.url


def run(profile: Path, servers: tuple[str, str], out: Path, *extra: str) -> Result:
    template, baseline = servers
    return CliRunner().invoke(
        cli,
        [
            "tune", str(profile), "--endpoint-per-k", template, "--baseline", baseline,
            "--k", ",".join(map(str, KS)), "--concurrency", "1,4,8", "--requests", "8",
            "--max-tokens", "13", "--out", str(out), "--offline", *extra,
        ],
    )  # fmt: skip


def test_tune_chooses_k_per_load_and_writes_the_schedule(
    profile: Path, servers: tuple[str, str], tmp_path: Path
) -> None:
    out = tmp_path / "tune"
    result = run(profile, servers, out)
    assert result.exit_code == 0, result.output
    document = json.loads((out / "tune.json").read_text())
    assert [(c["concurrency"], c["k"]) for c in document["choices"]] == [(1, 3), (4, 1), (8, 0)]
    assert document["schedule"] == [[1, 1, 3], [2, 4, 1], [5, 16, 0]]
    assert document["crossover"] == 8
    assert document["policy"] == {
        "retune": {"min_tokens": 1, "max_tokens": 3},
        "switch_to_baseline_at_concurrency": 8,
    }
    cells = {(c["k"], c["concurrency"]): c for c in document["cells"]}
    assert cells[(3, 8)]["outcome"] == "skipped"
    assert "k=3 already lost at load 4" in cells[(3, 8)]["note"]
    for key in ((1, 1), (3, 1), (1, 4), (3, 4), (1, 8)):
        cell = cells[key]
        assert cell["ok"] == 8 and cell["failed"] == 0
        for figure in ("speedup", "tpot_ratio", "candidate_tpot_ms", "baseline_tpot_ms"):
            ratio = cell[figure]  # every number with its interval
            assert ratio["low"] <= ratio["value"] <= ratio["high"], (key, figure, ratio)
        assert cell["acceptance_length"] == pytest.approx(key[0] + 1)
    # the tuned profile: vLLM 0.32's dynamic schedule, k up to the largest chosen
    tuned = yaml.safe_load((out / "profile.yaml").read_text())
    assert tuned["proposer"]["num_speculative_tokens"] == 3
    assert tuned["proposer"]["num_speculative_tokens_per_batch_size"] == document["schedule"]
    validated = CliRunner().invoke(cli, ["validate", str(out / "profile.yaml"), "--offline"])
    assert validated.exit_code == 0, validated.output
    markdown = (out / "tune.md").read_text()
    assert "| 1 | " in markdown and "**baseline**" in markdown and "1-1: k=3, 2-4: k=1" in markdown
    assert (out / "tune.png").stat().st_size > 10_000
    assert "1-1: k=3, 2-4: k=1, 5-16: k=0" in result.output


SGLANG_EAGLE3 = {
    "engine": {"name": "sglang", "version": "0.5.23"},
    "target": {"model": "meta-llama/Llama-3.1-8B-Instruct"},
    "proposer": {
        "method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
        "num_speculative_tokens": 3,
    },
    "hardware": {"gpu": "H100-80GB"},
    "serving": {"max_model_len": 4096, "max_concurrency": 16},
}  # fmt: skip


def test_tune_writes_sglang_s_adaptive_slots_or_the_best_fixed_k(
    servers: tuple[str, str], tmp_path: Path
) -> None:
    """SGLang 0.5.23 runs a draft length per batch size for an EAGLE-3 chain: the tuned profile
    gets the schedule, and its launch the adaptive config. A STANDALONE draft does not adapt
    there, so the same measurements give the best fixed k, and the header says why."""
    document = {"apiVersion": "specdeploy/v1", "kind": "SpeculativeDeployment",
                "metadata": {"name": "sg"}, **SGLANG_EAGLE3}  # fmt: skip
    eagle = tmp_path / "sg-eagle3.yaml"
    eagle.write_text(yaml.safe_dump(document, sort_keys=False))
    out = tmp_path / "tune"
    result = run(eagle, servers, out, "--concurrency", "1,8")
    assert result.exit_code == 0, result.output
    measured = json.loads((out / "tune.json").read_text())
    assert measured["schedule"][0][2] == 3 and measured["schedule"][-1][2] == 0
    tuned = yaml.safe_load((out / "profile.yaml").read_text())
    assert tuned["proposer"]["num_speculative_tokens_per_batch_size"] == measured["schedule"]
    rendered = CliRunner().invoke(
        cli, ["render", str(out / "profile.yaml"), "--offline", "--out", str(tmp_path / "r")]
    )
    assert rendered.exit_code == 0, rendered.output
    launch = json.loads((tmp_path / "r" / "launch.json").read_text())
    assert "--speculative-adaptive" in launch["argv"]
    slots = json.loads((tmp_path / "r" / "sglang-adaptive.json").read_text())
    assert slots["1"] == {"candidate_steps": [3]}
    assert [v["candidate_steps"] for v in slots.values()][-1] == [0]

    document["proposer"] = {**document["proposer"], "method": "draft_model",
                            "model": "meta-llama/Llama-3.2-1B-Instruct"}  # fmt: skip
    draft = tmp_path / "sg-draft.yaml"
    draft.write_text(yaml.safe_dump(document, sort_keys=False))
    fixed = run(draft, servers, out, "--concurrency", "1,8")  # every cell reused
    assert fixed.exit_code == 0, fixed.output
    text = (out / "profile.yaml").read_text()
    assert "One k at every load (--speculative-algorithm STANDALONE does not adapt" in text
    assert "speculation stops paying at concurrency 8" in text
    tuned = yaml.safe_load(text)
    assert tuned["proposer"]["num_speculative_tokens"] == 3
    assert "num_speculative_tokens_per_batch_size" not in tuned["proposer"]


def test_a_second_run_reuses_every_cell_and_other_settings_are_refused(
    profile: Path, servers: tuple[str, str], tmp_path: Path
) -> None:
    out = tmp_path / "tune"
    assert run(profile, servers, out, "--concurrency", "1").exit_code == 0
    first = json.loads((out / "tune.json").read_text())
    again = run(profile, servers, out, "--concurrency", "1,4")
    assert again.exit_code == 0, again.output
    assert "reusing 2 cell(s)" in again.output
    second = json.loads((out / "tune.json").read_text())
    at_one = [c for c in second["cells"] if c["concurrency"] == 1]
    assert at_one == first["cells"]  # measured once, kept as measured
    assert {c["concurrency"] for c in second["cells"]} == {1, 4}

    other = run(profile, servers, out, "--requests", "4")
    assert other.exit_code == 2, other.output
    assert "holds cells measured with other settings (requests: 8 there, 4 now)" in other.output
    assert "Traceback" not in other.output


def test_no_k_template_and_a_baseline_profile_are_refused(
    profile: Path, servers: tuple[str, str], tmp_path: Path
) -> None:
    _, baseline = servers
    bad = run(profile, (baseline, baseline), tmp_path / "x")
    assert bad.exit_code == 2 and "has no {k}" in bad.output
    plain = REPO_ROOT / "profiles" / "vllm-qwen3-8b-baseline.yaml"
    refused = run(plain, servers, tmp_path / "y")
    assert refused.exit_code == 4 and "proposer.method is 'none'" in refused.output, refused.output


def ratio(value: float, low: float, high: float) -> Ratio:
    return Ratio(value, low, high)


class TestChoose:
    def test_the_smaller_k_within_noise_of_the_best(self) -> None:
        cells = [
            Cell(2, 1, "pays", ratio(1.50, 1.40, 1.60)),
            Cell(4, 1, "pays", ratio(1.55, 1.45, 1.65)),
        ]
        [picked] = choose(cells)
        assert picked.k == 2 and "within noise" in picked.why

    def test_a_better_k_beyond_noise_wins(self) -> None:
        cells = [
            Cell(2, 1, "pays", ratio(1.20, 1.10, 1.30)),
            Cell(4, 1, "pays", ratio(1.80, 1.70, 1.90)),
        ]
        assert choose(cells)[0].k == 4

    def test_nothing_paying_beyond_noise_is_the_baseline(self) -> None:
        cells = [Cell(2, 8, "inconclusive", ratio(1.05, 0.95, 1.15))]
        assert choose(cells) == [Choice(8, 0, None, "no k pays beyond noise: the baseline")]

    def test_k_is_kept_from_the_load_below_unless_the_new_one_is_better_beyond_noise(
        self,
    ) -> None:
        cells = [
            Cell(3, 1, "pays", ratio(2.0, 1.9, 2.1)),
            Cell(3, 2, "pays", ratio(1.50, 1.40, 1.60)),
            Cell(1, 2, "pays", ratio(1.55, 1.45, 1.65)),
        ]
        assert [c.k for c in choose(cells)] == [3, 3]

    def test_schedule_merges_equal_neighbours_and_reaches_max_batch(self) -> None:
        choices = [Choice(1, 3, None, ""), Choice(4, 3, None, ""), Choice(16, 0, None, "")]
        assert schedule(choices, 64) == [(1, 4, 3), (5, 64, 0)]
        # between two measured loads, the smaller k: the larger one only where it was measured
        rising = [Choice(1, 0, None, ""), Choice(4, 2, None, ""), Choice(16, 1, None, "")]
        assert schedule(rising, 32) == [(1, 3, 0), (4, 4, 2), (5, 32, 1)]
        assert crossover(choices) == 16
        assert crossover([Choice(1, 0, None, ""), Choice(4, 2, None, "")]) is None

    def test_a_load_whose_every_cell_was_skipped_gets_the_baseline(self) -> None:
        cells = [
            Cell(2, 1, "loses", ratio(0.8, 0.7, 0.9)),
            Cell(2, 4, "skipped", None, note="k=2 already lost at load 1"),
        ]
        assert [(c.concurrency, c.k) for c in choose(cells)] == [(1, 0), (4, 0)]
        assert "every k was skipped" in choose(cells)[1].why

    def test_prune_only_above_a_smaller_k_that_lost(self) -> None:
        lost = [Cell(2, 4, "loses", ratio(0.7, 0.6, 0.8))]
        assert prune(lost, 3, 4) is not None and prune(lost, 2, 8) is not None
        assert prune(lost, 3, 2) is None and prune(lost, 1, 8) is None
        assert prune(lost, 2, 4) is None  # the cell itself


def test_sigint_keeps_every_finished_cell_and_the_rest_is_measured_next_time(
    profile: Path, servers: tuple[str, str], tmp_path: Path
) -> None:
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "tune"
    template, baseline = servers
    argv = [
        sys.executable, "-m", "orchestrator", "tune", str(profile), "--endpoint-per-k", template,
        "--baseline", baseline, "--k", "1,3", "--concurrency", "1,4,8", "--requests", "8",
        "--max-tokens", "13", "--out", str(out), "--offline",
    ]  # fmt: skip
    child = subprocess.Popen(argv, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:  # the first cell is written, then Ctrl-C
            if (out / "tune.json").exists() and json.loads((out / "tune.json").read_text())[
                "cells"
            ]:
                break
            assert child.poll() is None, child.communicate()[0]
            time.sleep(0.05)
        child.send_signal(signal.SIGINT)
        output = child.communicate(timeout=60)[0].decode()
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 130, output
    assert "Traceback" not in output
    document = json.loads((out / "tune.json").read_text())
    kept = len(document["cells"])
    assert document["interrupted"] is True and 1 <= kept < 6
    assert not (out / "profile.yaml").exists()  # no schedule from part of the loads
    assert "run tune again with the same --out" in (out / "tune.md").read_text()

    resumed = run(profile, servers, out)
    assert resumed.exit_code == 0, resumed.output
    assert f"reusing {kept} cell(s)" in resumed.output
    assert len(json.loads((out / "tune.json").read_text())["cells"]) == 6


def test_the_tuned_profile_names_the_same_local_models_from_where_it_is_written(
    tmp_path: Path,
) -> None:
    from orchestrator.tune.report import tuned_profile

    source = tmp_path / "profiles" / "local" / "p.yaml"
    source.parent.mkdir(parents=True)
    text = "proposer: {method: draft_model, model: ../../models/draft}\ntarget: {model: org/t}\n"
    document = {"schedule": [[1, 4, 2], [5, 8, 0]], "choices": [], "crossover": 5}
    out = tmp_path / "out" / "tune"
    tuned = yaml.safe_load(tuned_profile(document, text, None, source, out) or "")
    assert (out / tuned["proposer"]["model"]).resolve() == (tmp_path / "models" / "draft")
    assert tuned["target"]["model"] == "org/t"  # a hub id stays as it is
    assert tuned["proposer"]["num_speculative_tokens_per_batch_size"] == [[1, 4, 2], [5, 8, 0]]


def test_a_cell_decided_early_stops_and_an_exhaustive_run_chooses_the_same(
    profile: Path, servers: tuple[str, str], tmp_path: Path
) -> None:
    """At concurrency 1 k=1 pays 1.7x and k=3 2.5x, far apart: both are decided after the first
    round of 8 of 16 requests; --exhaustive sends all 16 and chooses the same k."""
    early = run(profile, servers, tmp_path / "early", "--concurrency", "1", "--requests", "16")
    assert early.exit_code == 0, early.output
    every = run(
        profile, servers, tmp_path / "every", "--concurrency", "1", "--requests", "16",
        "--exhaustive",
    )  # fmt: skip
    assert every.exit_code == 0, every.output
    documents = {
        name: json.loads((tmp_path / name / "tune.json").read_text()) for name in ("early", "every")
    }
    stopped = {c["k"]: c for c in documents["early"]["cells"]}
    assert stopped[1]["ok"] == 8, stopped  # 1.7x against nothing measured yet: decided at once
    assert "stopped after 8 of 16 requests per arm: pays" in stopped[1]["note"]
    assert "(97.5% interval, 2 looks)" in stopped[1]["note"]  # 0.05 split over 2 looks
    # k=3 (2.5x) stops once its interval is apart from k=1's: usually after 8, later on a
    # loaded machine, never sent more than --requests
    assert stopped[3]["ok"] in (8, 16), stopped
    assert stopped[3]["ok"] == 16 or stopped[3]["note"].startswith("stopped after")
    assert all(c["ok"] == 16 and not c["note"] for c in documents["every"]["cells"])
    assert documents["early"]["schedule"] == documents["every"]["schedule"]
    assert documents["early"]["config"]["stopping"] == "sequential/3"
    # cells measured one way are not reused by a run measuring the other
    mixed = run(
        profile, servers, tmp_path / "early", "--concurrency", "1", "--requests", "16",
        "--exhaustive",
    )  # fmt: skip
    assert mixed.exit_code == 2 and "stopping: 'sequential/3' there, 'none' now" in mixed.output


class TestRounds:
    def settings(self, requests: int, exhaustive: bool = False) -> Any:
        from orchestrator.bench.sweep import SweepConfig
        from orchestrator.bench.workload import load_workload
        from orchestrator.tune.run import TuneSettings

        return TuneSettings(
            ks=(1,),
            loads=(1,),
            endpoint_per_k="http://h/{k}",
            baseline="http://b",
            workload=load_workload("chat"),
            config=SweepConfig(requests=requests),
            exhaustive=exhaustive,
        )

    def test_rounds_are_at_least_eight_requests_and_four_times_the_load(self) -> None:
        settings = self.settings(24)
        assert settings.rounds(1) == [8, 8, 8]
        assert settings.rounds(2) == [8, 8, 8]
        assert settings.rounds(3) == [12, 12]
        assert settings.rounds(4) == [24]  # a second round of 8 would be mostly draining
        assert self.settings(64).rounds(4) == [22, 22, 20]
        assert self.settings(16).rounds(1) == [8, 8]
        assert self.settings(12).rounds(1) == [12]
        assert self.settings(24, exhaustive=True).rounds(1) == [24]

    def test_a_look_stops_only_on_what_the_choice_needs(self) -> None:
        from orchestrator.tune.run import _decided

        def record(candidate: list[float]) -> Any:
            from orchestrator.bench.client import Endpoint, RequestResult
            from orchestrator.bench.sweep import ArmLevel, SweepConfig, SweepRecord
            from orchestrator.bench.workload import load_workload

            def arm(label: str, rates: list[float]) -> ArmLevel:
                results = tuple(
                    RequestResult(True, None, 0.0, 10 / r, 0.01, (), 10, "") for r in rates
                )
                return ArmLevel(label, 1, results, 1.0, None, None)

            return SweepRecord(
                Endpoint("k=2", "http://c", ""),
                Endpoint("baseline", "http://b", ""),
                load_workload("chat"),
                SweepConfig(),
                [arm("k=2", candidate), arm("baseline", [100.0, 101.0, 99.0, 100.0] * 2)],
            )

        assert "loses" in (_decided(record([70, 71, 69, 70] * 2), [], 0.975) or "")
        assert "pays" in (_decided(record([150, 151, 149, 150] * 2), [], 0.975) or "")
        assert _decided(record([90, 120, 100, 110] * 2), [], 0.975) is None  # straddles 1
        close = Cell(1, 1, "pays", ratio(1.45, 1.3, 1.6))
        apart = Cell(1, 1, "pays", ratio(1.15, 1.1, 1.2))
        assert _decided(record([150, 151, 149, 150] * 2), [close], 0.975) is None
        assert "pays" in (_decided(record([150, 151, 149, 150] * 2), [apart], 0.975) or "")


def test_acceptance_over_rounds_sums_counters_and_weights_by_drafts() -> None:
    from orchestrator.engines.metrics import Acceptance
    from orchestrator.tune.run import merge_acceptance

    one = Acceptance("vllm", 0.5, 2.0, drafts=10, draft_tokens=20, accepted_tokens=10,
                     per_position=(0.6, 0.4))  # fmt: skip
    two = Acceptance("vllm", 0.25, 1.5, drafts=30, draft_tokens=60, accepted_tokens=15,
                     per_position=(0.4, 0.1))  # fmt: skip
    merged = merge_acceptance([one, None, two])
    assert merged is not None
    assert merged.drafts == 40 and merged.accepted_tokens == 25 and merged.draft_tokens == 80
    assert merged.mean_acceptance_length == pytest.approx((10 * 2.0 + 30 * 1.5) / 40)
    assert merged.per_position == pytest.approx((0.45, 0.175))
    gauge = Acceptance("sglang", None, 2.2, last_batch=True)
    assert merge_acceptance([one, gauge]) is gauge
    assert merge_acceptance([None, None]) is None
