"""The control loop's decisions on synthetic measurements: hysteresis, dwell, smoothing,
exploring an unmeasured twin, retune from per-position acceptance."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from orchestrator.engines.metrics import Acceptance, Serving
from orchestrator.operator.policy import (
    Memory,
    Observation,
    levels,
    proposed_length,
    step,
)
from orchestrator.profile.schema import PolicySpec, RetuneSpec

INTERVAL = 10.0
SWITCH = PolicySpec(mode="switch", dwell_seconds=60, hysteresis=0.1, smoothing=1.0, min_requests=2)


def serving(
    per_token_ms: float | None,
    load: float = 1.0,
    finished: float = 5,
    *,
    tpot_ms: float | None = None,
) -> Serving:
    """A twin that finished `finished` requests at `load` requests in the server, whose request
    time per output token was `per_token_ms` (the engine's TPOT: `tpot_ms`, the same unless
    given)."""
    busy = load * INTERVAL
    tokens = None if per_token_ms is None else busy / (per_token_ms / 1000)
    tpot = per_token_ms if tpot_ms is None else tpot_ms
    return Serving(
        None if tpot is None else tpot / 1000,
        finished,
        busy_s=busy,
        running=load,
        waiting=0.0,
        output_tokens=tokens,
    )


def obs(
    at: float, spec: Serving | None, base: Serving | None, accepted: Acceptance | None = None
) -> Observation:
    return Observation(at, INTERVAL, spec, base, accepted)


def run(
    policy: PolicySpec,
    rounds: list[tuple[Serving | None, Serving | None]],
    memory: Memory | None = None,
    k: int = 4,
) -> list[Any]:
    """Feed one observation per interval; the decisions, in order."""
    memory = memory or Memory()
    decisions = []
    for i, (spec, base) in enumerate(rounds):
        memory, decision = step(policy, memory, obs(100.0 + i * INTERVAL, spec, base), k)
        decisions.append(decision)
    return decisions


def run_with_memory(
    policy: PolicySpec,
    rounds: list[tuple[Serving | None, Serving | None]],
    memory: Memory | None = None,
    *,
    share: int | None = None,
    start: int = 0,
) -> tuple[list[Any], Memory]:
    """As `run`, with the route's explore share, returning the memory too."""
    memory = memory or Memory()
    decisions = []
    for i, (spec, base) in enumerate(rounds, start=start):
        memory, decision = step(policy, memory, obs(100.0 + i * INTERVAL, spec, base), 4, share)
        decisions.append(decision)
    return decisions, memory


class TestLoadLevel:
    @pytest.mark.parametrize(
        ("load", "level"),
        [
            (0.3, "1"),
            (1.0, "1"),
            (1.6, "2"),
            (3.0, "3-4"),
            (4.0, "3-4"),
            (7.9, "5-8"),
            (12, "9-16"),
        ],
    )
    def test_levels_double(self, load: float, level: str) -> None:
        assert levels(obs(0.0, serving(10, load=load), None)) == {"speculative": level}

    def test_a_twin_that_finished_nothing_has_no_level(self) -> None:
        assert "speculative" not in levels(obs(0.0, serving(10, finished=0), None))
        assert "speculative" not in levels(obs(0.0, None, None))

    def test_the_load_is_per_pod(self) -> None:
        two_pods = Observation(
            0.0, INTERVAL, serving(10, load=8), None, None, pods={"speculative": 2}
        )
        assert levels(two_pods) == {"speculative": "3-4"}


class TestSwitch:
    def test_moves_to_the_baseline_when_it_is_faster_at_this_load(self) -> None:
        [decision] = run(SWITCH, [(serving(40, load=8), serving(25, load=8))])
        assert decision.action == "switch" and decision.active == "baseline"
        assert decision.reason == "BaselineWins"
        assert decision.evidence["speculative"]["latencyPerTokenMs"] == 40.0
        assert decision.evidence["baseline"]["latencyPerTokenMs"] == 25.0
        assert decision.evidence["load"] == "5-8" and decision.evidence["latencyRatio"] == 0.625
        assert "25.0 ms" in decision.message and "40.0 ms" in decision.message

    def test_a_twin_whose_requests_queue_loses_though_its_tpot_is_lower(self) -> None:
        # The speculative twin runs a third of the requests at once (its step budget goes to
        # drafts): those decode in 23 ms per token, but with the wait each took 60 ms per output
        # token end to end; the baseline runs them all at 45 ms. By TPOT speculation wins 2x.
        spec = serving(60, load=8, tpot_ms=23)
        base = serving(45, load=8, tpot_ms=45)
        [decision] = run(SWITCH, [(spec, base)])
        assert decision.action == "switch" and decision.active == "baseline", decision.message
        assert decision.evidence["speculative"]["tpotMs"] == 23.0
        assert decision.evidence["latencyRatio"] == 0.75
        assert "request time per output token" in decision.message

    @pytest.mark.parametrize(
        ("busy_s", "output_tokens"), [(1e300, 1e-300), (1e308, 0.5), (-10.0, 100.0)]
    )
    def test_counters_that_make_no_finite_figure_time_nothing(
        self, busy_s: float, output_tokens: float
    ) -> None:
        # a tenant's /metrics claiming a sliver of a token (or negative latency) for its twin:
        # nothing infinite or negative reaches the memory, the evidence or the status
        lying = Serving(0.02, 5, busy_s, 1.0, 0.0, output_tokens=output_tokens)
        assert lying.seconds_per_token is None
        memory, decision = step(SWITCH, Memory(), obs(100.0, lying, serving(30)), 4)
        assert memory.latency.get("speculative") == {}
        assert decision.evidence["speculative"]["latencyPerTokenMs"] is None
        assert "inf" not in repr(memory.to_status()).lower()

    def test_a_twin_whose_engine_reports_no_output_tokens_is_not_timed(self) -> None:
        untimed = Serving(0.02, 5, busy_s=10.0, running=1.0, waiting=0.0, output_tokens=None)
        [decision] = run(SWITCH, [(untimed, serving(30))])
        assert decision.action == "hold" and decision.reason == "NoEvidence"

    def test_stays_while_speculation_wins(self) -> None:
        [decision] = run(SWITCH, [(serving(20), serving(30))])
        assert decision.action == "hold" and decision.reason == "Winning"

    def test_hysteresis_keeps_a_small_difference_from_moving_traffic(self) -> None:
        # baseline 5 % faster: inside the 10 % band
        [decision] = run(SWITCH, [(serving(20), serving(19))])
        assert decision.action == "hold" and decision.reason == "WithinHysteresis"

    def test_no_more_than_one_switch_per_dwell_time_however_the_figures_flap(self) -> None:
        flapping = [(serving(40), serving(20)), (serving(20), serving(40))] * 10
        decisions = run(SWITCH, flapping)
        switches = [100.0 + i * INTERVAL for i, d in enumerate(decisions) if d.action == "switch"]
        assert len(switches) >= 2  # it does follow the evidence ...
        gaps = [b - a for a, b in itertools.pairwise(switches)]
        assert all(gap >= SWITCH.dwell_seconds for gap in gaps)  # ... but never faster than dwell
        assert any(d.reason == "Dwelling" for d in decisions)

    def test_comes_back_when_load_falls(self) -> None:
        high = [(serving(40, load=8), serving(25, load=8))]
        low = [(serving(15, load=1), serving(30, load=1))] * 7
        decisions = run(SWITCH, high + low)
        assert decisions[0].active == "baseline"
        back = next(
            i for i, d in enumerate(decisions) if d.action == "switch" and d.active == "speculative"
        )
        assert back * INTERVAL >= SWITCH.dwell_seconds
        assert decisions[back].reason == "SpeculationWins"

    def test_smoothing_lets_one_noisy_interval_pass(self) -> None:
        smooth = PolicySpec(mode="switch", dwell_seconds=10, hysteresis=0.1, smoothing=0.3)
        steady = [(serving(20), serving(30))] * 3
        spike = [(serving(60), serving(30))]  # one slow interval of the speculative twin
        decisions = run(smooth, steady + spike)
        assert all(d.action == "hold" for d in decisions)
        # 0.3 * 60 + 0.7 * 20 = 32 ms against 30: within the band
        assert decisions[-1].evidence["speculative"]["smoothedLatencyPerTokenMs"] == pytest.approx(
            32.0
        )
        unsmoothed = run(PolicySpec(mode="switch", dwell_seconds=10, smoothing=1.0), steady + spike)
        assert unsmoothed[-1].action == "switch"

    def test_compares_only_at_the_same_load_level(self) -> None:
        # both timed at load 1 (mirror); then the speculative twin serves load 8 alone
        mirror_low = [(serving(20, load=1), serving(25, load=1))]
        alone_high = [(serving(60, load=8), serving(None, finished=0))]
        decisions = run(SWITCH, mirror_low + alone_high)
        assert decisions[-1].action == "hold" and decisions[-1].reason == "NoEvidence"
        assert "load 5-8" in decisions[-1].message

    def test_both_twins_are_filed_under_the_intervals_load(self) -> None:
        # time-sliced mirror: each twin busy half the interval, one a little more
        [decision] = run(SWITCH, [(serving(40, load=2.6), serving(20, load=3.4))])
        assert decision.evidence["load"] == "3-4" and decision.action == "switch"

    def test_never_sends_all_traffic_to_a_twin_not_timed_at_this_load(self) -> None:
        # Issue 21: without a mirror the idle twin finishes nothing; it used to get all traffic
        # "to re-measure". Without policy.explore_percent it is never tried, however long.
        alone = [(serving(40, load=8), None)] * 30
        decisions = run(SWITCH, alone)
        assert {d.action for d in decisions} == {"hold"}
        assert all(d.active == "speculative" for d in decisions)
        assert "set policy.explore_percent" in decisions[-1].message

    def test_explores_with_a_bounded_share_then_compares_at_the_same_load(self) -> None:
        explore = SWITCH.model_copy(update={"explore_percent": 50})
        alone = [(serving(40, load=8), None)] * 3
        decisions, memory = run_with_memory(explore, alone, share=50)
        assert [d.reason for d in decisions] == ["NoEvidence", "NoEvidence", "Exploring"]
        assert decisions[-1].action == "explore" and decisions[-1].explore_percent == 50
        assert decisions[-1].active == "speculative"  # the active twin keeps the other half
        # Half the traffic each, one pod each: the same arrivals per pod, so both are filed
        # under one level; the baseline is faster there, so traffic moves.
        split = [(serving(40, load=4), serving(20, load=3))]
        [decision], memory = run_with_memory(explore, split, memory, share=50, start=3)
        assert decision.action == "switch" and decision.reason == "BaselineWins"
        assert memory.exploring == 0 and decision.explore_percent == 0

    def test_a_small_share_that_cannot_load_the_twin_gives_up_after_a_dwell(self) -> None:
        explore = SWITCH.model_copy(update={"explore_percent": 10})
        alone = [(serving(40, load=8), None)] * 3
        decisions, memory = run_with_memory(explore, alone, share=10)
        assert decisions[-1].action == "explore" and decisions[-1].explore_percent == 10
        # 10 % of the traffic: the baseline's pod finishes a ninth as many requests, at load 1
        trickle = [(serving(40, load=7, finished=9), serving(20, load=1, finished=1))] * 7
        later, memory = run_with_memory(explore, trickle, memory, share=10, start=3)
        assert [d.reason for d in later[:5]] == ["Exploring"] * 5
        assert all(d.explore_percent == 10 for d in later[:5])
        ended = next(d for d in later if d.action == "explore")
        assert ended.reason == "ExploreInconclusive" and ended.explore_percent == 0
        assert "cannot load it as much" in ended.message and memory.exploring == 0
        assert all(d.active == "speculative" for d in decisions + later)

    def test_an_explored_twin_that_stops_answering_gets_no_more_traffic(self) -> None:
        explore = SWITCH.model_copy(update={"explore_percent": 50})
        memory = Memory(exploring=50, explored_at=90.0, alone=0)
        sick = Observation(
            100.0, INTERVAL, serving(40, load=8), None, None, frozenset({"baseline"})
        )
        memory, decision = step(explore, memory, sick, 4, 50)
        assert decision.action == "explore" and decision.reason == "ExploreAborted"
        assert decision.explore_percent == 0 and memory.exploring == 0

    def test_exploring_survives_the_status_round_trip(self) -> None:
        memory = Memory(exploring=10, explored_at=123.0)
        again = Memory.from_status(memory.to_status())
        assert again.exploring == 10 and again.explored_at == 123.0
        assert Memory.from_status({"explore": {"percent": 90}}).exploring == 0  # out of bounds
        # without a start, an explore cannot end by its dwell: none (a forged status)
        assert Memory.from_status({"explore": {"percent": 10}}).exploring == 0
        assert Memory.from_status({"explore": {"percent": 10, "since": "inf"}}).exploring == 0

    def test_an_explore_share_the_policy_does_not_give_is_dropped(self) -> None:
        # status says 30 %, the route gives 10 (explore_percent edited, or status forged)
        explore = SWITCH.model_copy(update={"explore_percent": 10})
        memory = Memory(exploring=30, explored_at=95.0)
        alone = obs(100.0, serving(40, load=8), None)
        memory, decision = step(explore, memory, alone, 4, 10)
        assert memory.exploring == 0 and decision.explore_percent == 0

    def test_too_few_finished_requests_decide_nothing(self) -> None:
        [decision] = run(SWITCH, [(serving(40, finished=1), serving(20, finished=1))])
        assert decision.action == "hold" and decision.reason == "NoEvidence"

    def test_idle_deployment_holds(self) -> None:
        [decision] = run(SWITCH, [(serving(None, finished=0), serving(None, finished=0))])
        assert decision.reason == "Idle"

    def test_static_never_moves(self) -> None:
        decisions = run(PolicySpec(mode="static"), [(serving(40), serving(10))] * 3)
        assert {d.action for d in decisions} == {"hold"} and decisions[0].reason == "Static"


def accepted(
    *positions: float, length: float | None = None, last_batch: bool = False
) -> Acceptance:
    mean = length if length is not None else 1 + sum(positions)
    return Acceptance(
        "vllm",
        sum(positions) / len(positions),
        mean,
        per_position=positions or None,
        last_batch=last_batch,
    )


RETUNE = PolicySpec(
    mode="retune",
    dwell_seconds=60,
    smoothing=1.0,
    retune=RetuneSpec(lower_below=0.3, raise_above=0.8),
)


def retune(rounds: list[Acceptance], k: int = 4, policy: PolicySpec = RETUNE) -> list[Any]:
    memory, decisions = Memory(), []
    for i, acceptance in enumerate(rounds):
        memory, decision = step(
            policy, memory, obs(100.0 + i * INTERVAL, serving(20), None, acceptance), k
        )
        decisions.append(decision)
    return decisions


class TestHealthFirst:
    """A dead active twin loses its traffic at once to a twin that answers (issue 21: before,
    "Idle" forever, 0 switches in a simulated hour)."""

    def test_traffic_leaves_a_dead_active_twin_within_the_dwell(self) -> None:
        memory = Memory(active="speculative", changed_at=95.0)  # a change 5 s ago: dwelling
        dead = Observation(100.0, INTERVAL, None, serving(20), None, frozenset({"speculative"}))
        memory, decision = step(SWITCH, memory, dead, 4)
        assert (decision.action, decision.reason, decision.active) == (
            "switch", "ActiveUnhealthy", "baseline",
        )  # fmt: skip
        # and it does not flap back while the speculative twin stays dead
        again = Observation(110.0, INTERVAL, None, serving(20), None, frozenset({"speculative"}))
        _, held = step(SWITCH, memory, again, 4)
        assert held.action == "hold" and held.active == "baseline"

    def test_both_dead_holds(self) -> None:
        both = Observation(
            100.0, INTERVAL, None, None, None, frozenset({"speculative", "baseline"})
        )
        _, decision = step(SWITCH, Memory(), both, 4)
        assert decision.action == "hold" and decision.active == "speculative"

    def test_a_dead_idle_twin_changes_nothing(self) -> None:
        idle_dead = Observation(100.0, INTERVAL, serving(10), None, None, frozenset({"baseline"}))
        _, decision = step(SWITCH, Memory(), idle_dead, 4)
        assert decision.action == "hold" and decision.active == "speculative"


class TestRetune:
    def test_lowers_to_the_positions_still_accepted_often_enough(self) -> None:
        [decision] = retune([accepted(0.69, 0.36, 0.22, 0.18)])
        assert decision.action == "retune" and decision.num_speculative_tokens == 2
        assert "4 -> 2" in decision.message and "0.69, 0.36, 0.22, 0.18" in decision.message

    def test_raises_by_one_while_the_deepest_position_is_accepted(self) -> None:
        [decision] = retune([accepted(0.98, 0.95, 0.9)], k=3)
        assert decision.action == "retune" and decision.num_speculative_tokens == 4

    def test_keeps_a_length_that_fits(self) -> None:
        [decision] = retune([accepted(0.9, 0.7, 0.5, 0.4)])
        assert decision.action == "hold" and decision.reason == "Tuned"

    def test_waits_for_measurements_of_the_new_length_and_the_dwell_time(self) -> None:
        low = accepted(0.6, 0.2, 0.1, 0.05)
        decisions = retune([low, low, accepted(0.6, 0.2), accepted(0.9, 0.85)], k=4)
        assert decisions[0].num_speculative_tokens == 1 and decisions[0].action == "retune"
        # the old length's figures do not count for the new one
        assert decisions[1].action == "hold" and decisions[1].reason == "NoEvidence"
        assert decisions[3].reason == "NoEvidence"  # two positions measured, length is 1

    def test_never_below_min_tokens(self) -> None:
        policy = PolicySpec(mode="retune", retune=RetuneSpec(min_tokens=2))
        assert proposed_length((0.1, 0.05, 0.01), policy) == 2

    def test_never_above_max_tokens(self) -> None:
        policy = PolicySpec(mode="retune", retune=RetuneSpec(max_tokens=3))
        assert proposed_length((0.99, 0.98, 0.97), policy) == 3

    def test_last_batch_gauges_are_smoothed(self) -> None:
        policy = PolicySpec(mode="switch", smoothing=0.5)
        memory = Memory()
        for length in (3.0, 1.0):  # SGLang's spec_accept_length of two batches
            gauge = Acceptance("sglang", None, length, last_batch=True)
            memory, _ = step(policy, memory, obs(100, serving(20), serving(30), gauge), 4)
        assert memory.acceptance_length == pytest.approx(2.0)


class TestMemory:
    def test_round_trips_through_status(self) -> None:
        decisions_memory = Memory(
            active="baseline",
            changed_at=5.0,
            latency={"baseline": {"1": (0.02, 5.0)}},
            per_position=(0.5,),
            num_speculative_tokens=2,
        )
        assert Memory.from_status(decisions_memory.to_status()) == decisions_memory

    @pytest.mark.parametrize(
        "garbage",
        [None, "x", {"latencyPerToken": {"baseline": {"1": "no"}}}, {"active": "sideways"}],
    )
    def test_garbage_in_status_starts_afresh(self, garbage: Any) -> None:
        assert Memory.from_status(garbage).active == "speculative"

    def test_an_earlier_operators_tpot_memory_is_not_compared(self) -> None:
        # before the switch compared request time per output token it remembered TPOT: another
        # quantity, so each twin is timed again
        old = {"active": "baseline", "tpot": {"baseline": {"1": [0.02, 5.0]}}}
        memory = Memory.from_status(old)
        assert memory.active == "baseline" and memory.latency == {}

    def test_old_measurements_are_forgotten(self) -> None:
        policy = PolicySpec(mode="switch", dwell_seconds=10)
        memory, _ = step(policy, Memory(), obs(0.0, serving(20), serving(30)), 4)
        memory, _ = step(policy, memory, obs(1000.0, None, None), 4)
        assert memory.latency == {"speculative": {}, "baseline": {}}
