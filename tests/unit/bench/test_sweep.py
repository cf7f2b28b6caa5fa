"""The sweep and its verdict against loopback servers with controlled latencies.

The crossover test places the crossover: the candidate commits 3 tokens per step, but its step
time grows with the square of the concurrent requests while the baseline's barely grows, so per
token it is faster at concurrency 1 and 2 (9 and 11.25 ms vs 18 and 18.4 ms: 2x and 1.6x) and
slower from 4 on (29 vs 19 ms at 4, 0.65x; 0.2x at 8). The loopback server keeps its steps on a
deadline clock, so event-loop lateness does not add to every step, and the steps are long (18 ms
a baseline token) beside what a loaded machine spends on each streamed chunk: the server and the
client share one interpreter here, and with 6 ms steps a loaded CI machine measured "pays" and
"inconclusive" at concurrency 4 (the baseline's more numerous chunks were slowed most). The open
loop test scales its rates with the steps, so its arrival pattern is the same in step units.
"""

from __future__ import annotations

import asyncio
import itertools
import signal
import time

import pytest

from orchestrator.bench.client import Endpoint
from orchestrator.bench.sweep import SweepConfig, arrival_offsets, run_sweep
from orchestrator.bench.verdict import judge
from orchestrator.bench.workload import load_workload
from orchestrator.errors import BenchError
from tests.unit.bench.conftest import StartServer

CHAT = load_workload("chat")


def candidate_step(active: int) -> float:
    return 0.027 * (1 + 0.25 * (active - 1) ** 2)


def baseline_step(active: int) -> float:
    return 0.018 * (1 + 0.02 * (active - 1))


def arms(cand_url: str, base_url: str) -> tuple[Endpoint, Endpoint]:
    return Endpoint("candidate", cand_url, ""), Endpoint("baseline", base_url, "")


class TestCrossover:
    def test_verdict_finds_the_crossover_where_it_was_placed(
        self, start_server: StartServer
    ) -> None:
        cand = start_server(step_delay=candidate_step, tokens_per_step=3, draft_tokens_per_step=3)
        base = start_server(step_delay=baseline_step)
        config = SweepConfig(concurrency=(1, 2, 4, 8), requests=8, max_tokens=19)
        record = run_sweep(*arms(cand.url, base.url), CHAT, config)
        verdict = judge(record)

        outcomes = {lv.concurrency: lv.outcome for lv in verdict.levels}
        assert outcomes == {1: "pays", 2: "pays", 4: "loses", 8: "loses"}
        assert verdict.crossover.stops_paying_at == 4
        assert verdict.crossover.last_paying == 2
        assert verdict.crossover.estimated is not None and 2 < verdict.crossover.estimated < 4
        assert [lv.cost_rule_met for lv in verdict.levels] == [True, True, False, False]
        # the server really saw the concurrency it was asked for
        assert cand.counters.peak_active == 8
        # acceptance from the candidate's counters: 2 of 3 drafted tokens accepted per step
        for lv in verdict.levels:
            assert lv.candidate is not None and lv.baseline is not None
            assert lv.candidate.acceptance_rate == pytest.approx(2 / 3)
            assert lv.candidate.mean_acceptance_length == pytest.approx(3.0)
            assert lv.baseline.acceptance_rate is None
            assert lv.output_agreement == 1.0
        assert [w.code for w in verdict.warnings] == []

    def test_bounded_request_count(self, start_server: StartServer) -> None:
        cand, base = start_server(), start_server()
        config = SweepConfig(concurrency=(1, 3), requests=5, max_tokens=4)
        record = run_sweep(*arms(cand.url, base.url), CHAT, config)
        assert cand.counters.requests == 1 + 5 + 5  # probe + two levels
        assert all(len(arm.results) == 5 for arm in record.arms)
        # streams are read to the end, so keep-alive connections are reused, not reopened
        assert cand.counters.connections <= 3


class TestOpenLoop:
    def test_verdict_finds_where_speculation_stops_paying_over_request_rates(
        self, start_server: StartServer
    ) -> None:
        # At 8/3 req/s (this seed's schedule: never 3 requests within a baseline request's
        # 340 ms) a request has the server to itself or shares it with one other, where the
        # candidate is faster; at 400/3 req/s all of a level's requests arrive within 60 ms, a
        # small part of one candidate request, and the candidate's step time grows with them
        # (candidate_step), as a real speculative server's does.
        cand = start_server(step_delay=candidate_step, tokens_per_step=3, draft_tokens_per_step=3)
        base = start_server(step_delay=baseline_step)
        low, high = 8.0 / 3, 400.0 / 3
        config = SweepConfig(request_rates=(low, high), requests=8, max_tokens=19)
        record = run_sweep(*arms(cand.url, base.url), CHAT, config)
        verdict = judge(record)

        assert [(lv.request_rate, lv.outcome) for lv in verdict.levels] == [
            (low, "pays"),
            (high, "loses"),
        ]
        assert verdict.crossover.axis == "request_rate"
        assert (verdict.crossover.stops_paying_at, verdict.crossover.last_paying) == (high, low)
        assert "stops paying at 133.333 req/s" in verdict.crossover.summary
        assert "requests/s" in verdict.crossover.summary
        # open loop: arrivals do not wait for completions, so the burst piles up on the server
        assert cand.counters.peak_active == 8 and base.counters.peak_active == 8

    def test_requests_start_on_the_schedule_the_same_for_both_arms(
        self, start_server: StartServer
    ) -> None:
        cand, base = start_server(), start_server()
        config = SweepConfig(request_rates=(20.0,), requests=6, max_tokens=4, arrival_seed=7)
        record = run_sweep(*arms(cand.url, base.url), CHAT, config)
        schedule = arrival_offsets(20.0, 6, seed=7)
        for arm in record.arms:
            assert arm.request_rate == 20.0 and arm.concurrency == 6
            starts = sorted(r.started_s for r in arm.results)
            assert len(starts) == 6
            assert sorted(r.due_s or 0.0 for r in arm.results) == schedule
            # never before its arrival time (lateness is the event loop's, not the schedule's)
            assert all(start >= due - 1e-3 for start, due in zip(starts, schedule, strict=True))

    def test_arrival_offsets_are_a_seeded_poisson_process(self) -> None:
        offsets = arrival_offsets(4.0, 4000, seed=0)
        assert offsets[0] == 0.0 and offsets == sorted(offsets)
        assert offsets == arrival_offsets(4.0, 4000, seed=0)
        assert offsets != arrival_offsets(4.0, 4000, seed=1)
        gaps = [b - a for a, b in itertools.pairwise(offsets)]
        mean = sum(gaps) / len(gaps)
        assert mean == pytest.approx(1 / 4.0, rel=0.05)
        # exponential gaps: the standard deviation equals the mean
        spread = (sum((g - mean) ** 2 for g in gaps) / len(gaps)) ** 0.5
        assert spread == pytest.approx(mean, rel=0.1)


class TestWarnings:
    def test_mispairing_when_nothing_is_accepted(self, start_server: StartServer) -> None:
        cand = start_server(tokens_per_step=1, draft_tokens_per_step=3)
        base = start_server()
        config = SweepConfig(concurrency=(1, 2), requests=3, max_tokens=6)
        verdict = judge(run_sweep(*arms(cand.url, base.url), CHAT, config))
        mispairing = [w for w in verdict.warnings if w.code == "mispairing"]
        assert len(mispairing) == 1
        assert "mean acceptance length 1.00" in mispairing[0].message

    def test_no_warning_for_good_acceptance_nor_for_a_plain_baseline(
        self, start_server: StartServer
    ) -> None:
        cand = start_server(tokens_per_step=2, draft_tokens_per_step=2)
        config = SweepConfig(concurrency=(1,), requests=2, max_tokens=5)
        verdict = judge(run_sweep(*arms(cand.url, start_server().url), CHAT, config))
        assert not {"mispairing", "baseline-speculates"} & {w.code for w in verdict.warnings}

    def test_speculating_baseline_is_flagged(self, start_server: StartServer) -> None:
        spec = {"tokens_per_step": 2, "draft_tokens_per_step": 2}
        cand, base = start_server(**spec), start_server(**spec)
        config = SweepConfig(concurrency=(1,), requests=2, max_tokens=5)
        verdict = judge(run_sweep(*arms(cand.url, base.url), CHAT, config))
        assert "baseline-speculates" in {w.code for w in verdict.warnings}

    @pytest.mark.parametrize(("repeat", "flagged"), [("la", True), (None, False)])
    def test_degenerate_outputs_are_flagged(
        self, start_server: StartServer, repeat: str | None, flagged: bool
    ) -> None:
        cand = start_server(repeat=repeat, tokens_per_step=2, draft_tokens_per_step=2)
        base = start_server()
        config = SweepConfig(concurrency=(1,), requests=2, max_tokens=40)
        verdict = judge(run_sweep(*arms(cand.url, base.url), CHAT, config))
        warnings = [w for w in verdict.warnings if w.code == "degenerate-output"]
        assert bool(warnings) is flagged
        if flagged:
            assert warnings[0].message.startswith("candidate: 2 of 2 outputs repeat")

    @pytest.mark.parametrize(("tokens_per_chunk", "flagged"), [(4, True), (1, False)])
    def test_a_buffered_baseline_stream_is_flagged(
        self, start_server: StartServer, tokens_per_chunk: int, flagged: bool
    ) -> None:
        cand = start_server(tokens_per_step=2, draft_tokens_per_step=2)
        base = start_server(tokens_per_step=tokens_per_chunk)
        config = SweepConfig(concurrency=(1,), requests=2, max_tokens=24)
        verdict = judge(run_sweep(*arms(cand.url, base.url), CHAT, config))
        warnings = [w for w in verdict.warnings if w.code == "coarse-stream"]
        assert bool(warnings) is flagged
        if flagged:
            assert "baseline at concurrency 1" in warnings[0].message
            assert "48 tokens in 14 chunks" in warnings[0].message  # 1 + 6 chunks of <= 4, x2

    def test_a_level_that_never_holds_its_concurrency_is_flagged(
        self, start_server: StartServer
    ) -> None:
        # 20 ms steps: a request's time is its steps', so 2 clients hold 2 in flight (2 ms ones
        # measured 0.88 on a loaded CI machine, where each request's fixed costs dominated)
        step = {"step_delay": lambda active: 0.02}
        cand, base = start_server(**step), start_server(**step)
        config = SweepConfig(concurrency=(2, 8), requests=4, max_tokens=6)
        verdict = judge(run_sweep(*arms(cand.url, base.url), CHAT, config))
        warnings = [w for w in verdict.warnings if w.code == "under-loaded"]
        assert len(warnings) == 1
        assert warnings[0].message.startswith(
            "concurrency 8 is a label the server never held: its 4 requests can never put 8 "
            "in flight (mean "
        )
        held = {
            lv.concurrency: lv.candidate.mean_in_flight for lv in verdict.levels if lv.candidate
        }
        assert held[8] is not None and held[8] <= 4.0
        assert held[2] is not None and held[2] >= 1.5  # 2 clients, 2 requests each: held


class TestBadConditions:
    def test_unreachable_candidate_is_a_bench_error(
        self, start_server: StartServer, closed_port_url: str
    ) -> None:
        with pytest.raises(BenchError) as info:
            run_sweep(*arms(closed_port_url, start_server().url), CHAT, SweepConfig(requests=1))
        assert info.value.exit_code == 7

    def test_probe_failure_is_a_bench_error(self, start_server: StartServer) -> None:
        with pytest.raises(BenchError, match="probe request failed: HTTP 500"):
            run_sweep(
                *arms(start_server().url, start_server(http_500=True).url),
                CHAT,
                SweepConfig(requests=1),
            )

    def test_failures_mid_sweep_are_counted_not_raised(self, start_server: StartServer) -> None:
        cand, base = start_server(), start_server()

        def break_candidate_after_probe(line: str) -> None:
            if line.startswith("baseline:"):
                cand.behaviour.error_after = 2

        config = SweepConfig(concurrency=(1, 2), requests=4, max_tokens=6)
        record = run_sweep(*arms(cand.url, base.url), CHAT, config, break_candidate_after_probe)
        verdict = judge(record)
        for lv in verdict.levels:
            assert lv.candidate is not None and lv.baseline is not None
            assert (lv.candidate.ok, lv.candidate.failed) == (0, 4)
            assert lv.baseline.ok == 4
            assert lv.speedup is None and lv.outcome == "no data"
        cause, count = verdict.levels[0].candidate.errors[0]  # type: ignore[union-attr]
        assert count == 4 and "error event mid-stream after N tokens" in cause
        assert "failed-requests" in {w.code for w in verdict.warnings}

    def test_servers_that_close_every_connection_unannounced_fail_no_request(
        self, start_server: StartServer
    ) -> None:
        cand, base = start_server(close_silently=True), start_server(close_silently=True)
        config = SweepConfig(concurrency=(1, 4), requests=24, max_tokens=4)
        record = run_sweep(*arms(cand.url, base.url), CHAT, config)
        assert [r.error for arm in record.arms for r in arm.results if not r.ok] == []
        assert cand.counters.posts == base.counters.posts == 1 + 2 * 24

    def test_level_time_limit_bounds_a_slow_level(self, start_server: StartServer) -> None:
        slow = start_server(step_delay=lambda active: 0.05)
        config = SweepConfig(concurrency=(2,), requests=1000, max_tokens=8, level_time_limit_s=0.2)
        began = time.perf_counter()
        record = run_sweep(*arms(slow.url, start_server().url), CHAT, config)
        assert time.perf_counter() - began < 15  # 1000 requests of 0.35 s would take minutes
        assert len(record.arms[0].results) <= 4

    def test_ctrl_c_keeps_what_was_measured(self, start_server: StartServer) -> None:
        cand = start_server(step_delay=lambda active: 0.004)
        # The second arm (baseline) runs ~10 s uninterrupted, so a SIGINT that a loaded CI
        # machine delivers late still lands while it is streaming.
        base = start_server(step_delay=lambda active: 0.05)
        messages: list[str] = []

        def interrupt_during_second_arm(line: str) -> None:
            messages.append(line)
            if (
                line.startswith("concurrency")
                and len([m for m in messages if m.startswith("concurrency")]) == 1
            ):
                # a real SIGINT, delivered while the next arm-level is streaming
                asyncio.get_running_loop().call_later(1.2, signal.raise_signal, signal.SIGINT)

        config = SweepConfig(concurrency=(1, 2, 4), requests=20, max_tokens=10)
        record = run_sweep(*arms(cand.url, base.url), CHAT, config, interrupt_during_second_arm)

        assert record.interrupted
        assert messages[-1].startswith("interrupted")
        first, second = record.arms
        assert first.complete and len(first.results) == 20
        assert not second.complete and 0 < len(second.results) < 20
        verdict = judge(record)
        assert "interrupted" in {w.code for w in verdict.warnings}
        assert verdict.levels[0].speedup is not None

    def test_sigterm_stops_as_ctrl_c_does_and_the_handler_is_restored(
        self, start_server: StartServer
    ) -> None:
        cand = start_server(step_delay=lambda active: 0.004)
        base = start_server(step_delay=lambda active: 0.05)  # ~10 s: SIGTERM lands while it runs
        messages: list[str] = []

        def terminate_during_second_arm(line: str) -> None:
            messages.append(line)
            if [m for m in messages if m.startswith("concurrency")] == [line]:
                asyncio.get_running_loop().call_later(1.2, signal.raise_signal, signal.SIGTERM)

        def before(signum: int, frame: object) -> None:
            raise AssertionError("the sweep's own handler should have taken SIGTERM")

        saved = signal.signal(signal.SIGTERM, before)
        try:
            config = SweepConfig(concurrency=(1, 2, 4), requests=20, max_tokens=10)
            record = run_sweep(*arms(cand.url, base.url), CHAT, config, terminate_during_second_arm)
            assert signal.getsignal(signal.SIGTERM) is before
        finally:
            signal.signal(signal.SIGTERM, saved)
        assert record.interrupted
        assert messages[-1] == "terminated (SIGTERM): keeping what was measured so far"
        first, second = record.arms
        assert first.complete and len(first.results) == 20
        assert not second.complete and len(second.results) < 20
