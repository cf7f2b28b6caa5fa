"""Pure verdict logic: outcomes from intervals, crossover placement, degenerate-output and
schedule checks."""

from __future__ import annotations

import dataclasses

import pytest

from orchestrator.bench.client import Endpoint, RequestResult
from orchestrator.bench.stats import Ratio
from orchestrator.bench.sweep import ArmLevel, SweepConfig, SweepRecord
from orchestrator.bench.verdict import LevelVerdict, _outcome, crossover, is_degenerate, judge
from orchestrator.bench.workload import load_workload


def level(concurrency: int, speedup: float | None) -> LevelVerdict:
    ratio = None if speedup is None else Ratio(speedup, speedup - 0.05, speedup + 0.05)
    return LevelVerdict(concurrency, None, None, ratio, None, None, _outcome(ratio), None)


class TestOutcome:
    @pytest.mark.parametrize(
        ("low", "high", "outcome"),
        [(1.01, 1.2, "pays"), (0.8, 0.99, "loses"), (0.95, 1.05, "inconclusive")],
    )
    def test_interval_decides(self, low: float, high: float, outcome: str) -> None:
        assert _outcome(Ratio((low + high) / 2, low, high)) == outcome

    def test_no_data(self) -> None:
        assert _outcome(None) == "no data"


class TestCrossover:
    def test_between_paying_and_losing_levels(self) -> None:
        found = crossover([level(1, 1.6), level(4, 1.2), level(16, 0.8), level(64, 0.5)])
        assert (found.stops_paying_at, found.last_paying) == (16, 4)
        # log2 interpolation: 1.2 -> 0.8 over 4 -> 16 crosses 1.0 halfway, at 8
        assert found.estimated == pytest.approx(8.0)
        assert "stops paying at concurrency 16" in found.summary

    def test_always_pays(self) -> None:
        found = crossover([level(1, 1.5), level(8, 1.1)])
        assert found.stops_paying_at is None and found.last_paying == 8
        assert "every measured load" in found.summary

    def test_never_pays(self) -> None:
        found = crossover([level(1, 0.9), level(8, 0.7)])
        assert found.stops_paying_at == 1 and found.last_paying is None
        assert "does not pay even at concurrency 1" in found.summary

    def test_levels_without_data_are_skipped(self) -> None:
        found = crossover([level(1, 1.4), level(2, None), level(4, 0.9)])
        assert (found.stops_paying_at, found.last_paying) == (4, 1)

    def test_no_data(self) -> None:
        assert crossover([level(1, None)]).stops_paying_at is None


class TestDegenerate:
    def test_word_loop(self) -> None:
        assert is_degenerate("the cat sat " * 20)

    def test_character_run(self) -> None:
        assert is_degenerate("!" * 80)

    def test_normal_prose(self) -> None:
        text = (
            "Lighthouses guided ships for centuries. Early ones burned wood or coal on towers; "
            "later, oil lamps with reflectors and then Fresnel lenses threw beams dozens of miles. "
            "Keepers lived on site, trimming wicks and logging weather, until automation arrived."
        )
        assert not is_degenerate(text)

    def test_short_output_is_not_judged(self) -> None:
        assert not is_degenerate("yes yes yes")


def test_crossover_says_when_it_rests_on_noise() -> None:
    wide = Ratio(0.9, 0.5, 1.5)
    noisy = LevelVerdict(1, None, None, wide, None, None, _outcome(wide), None)
    found = crossover([noisy])
    assert found.summary.startswith("speculation does not pay even at concurrency 1 (within noise")
    assert "raise --requests" in found.summary
    assert "within noise" not in crossover([level(1, 0.5)]).summary


class TestBehindSchedule:
    """Open loop: a client that starts requests ever later offers less load than the label."""

    @staticmethod
    def record(stretch: float, lag_s: float = 0.0, rate: float | None = 10.0) -> SweepRecord:
        def result(number: int) -> RequestResult:
            due = number / 10.0
            start = due * stretch + lag_s
            kept_due = due if rate is not None else None
            return RequestResult(True, None, start, 0.2, 0.05, (0.01,), 8, "t", number, kept_due)

        arm = ArmLevel("candidate", 8, tuple(result(n) for n in range(8)), 1.0, None, None)
        if rate is not None:
            arm = dataclasses.replace(arm, request_rate=rate)
        config = SweepConfig(request_rates=(rate,) if rate is not None else ())
        record = SweepRecord(
            Endpoint("candidate", "http://a", "m"),
            Endpoint("baseline", "http://b", "m"),
            load_workload("chat"),
            config,
        )
        record.arms.append(arm)
        return record

    @staticmethod
    def codes(record: SweepRecord) -> set[str]:
        return {w.code for w in judge(record).warnings}

    def test_starts_that_fall_ever_further_behind_are_flagged_with_the_numbers(self) -> None:
        found = [w for w in judge(self.record(1.5)).warnings if w.code == "behind-schedule"]
        assert len(found) == 1
        assert "candidate at 10 req/s: its 8 requests started over 1050 ms" in found[0].message
        assert "spread them over 700 ms (67% of the scheduled rate)" in found[0].message

    def test_a_constant_lag_or_a_closed_loop_level_is_not(self) -> None:
        assert "behind-schedule" not in self.codes(self.record(1.0, lag_s=0.5))
        assert "behind-schedule" not in self.codes(self.record(1.1))
        assert "behind-schedule" not in self.codes(self.record(1.5, rate=None))


def test_a_candidate_that_queues_half_its_requests_is_slower_though_its_mean_rate_is_higher() -> (
    None
):
    """Speculation under a token budget runs fewer requests at once: those it runs finish fast,
    the rest wait. At concurrency 8 the baseline takes 1 s per 24-token request; the candidate
    takes 0.25 s for half of them and 2.5 s for the others. The mean of per-request rates says
    2.2x (52.8 against 24 tokens/s), but the same tokens took 1.375 s of request time on average
    instead of 1 s: it is 0.73x, and so is its throughput at this concurrency."""

    def arm(label: str, latencies: list[float]) -> ArmLevel:
        results = tuple(
            RequestResult(True, None, 0.0, s, 0.01, (0.01,), 24, "t", n)
            for n, s in enumerate(latencies)
        )
        return ArmLevel(label, 8, results, max(latencies), None, None)

    record = SweepRecord(
        Endpoint("candidate", "http://a", "m"),
        Endpoint("baseline", "http://b", "m"),
        load_workload("chat"),
        SweepConfig(),
    )
    record.arms += [arm("candidate", [0.25, 2.5] * 32), arm("baseline", [1.0] * 64)]
    found = judge(record).levels[0]
    assert found.speedup is not None
    assert found.speedup.value == pytest.approx(1 / 1.375)
    assert found.speedup.high < 1.0 and found.outcome == "loses"
