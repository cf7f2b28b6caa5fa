"""memory.over-budget, memory.speculation-cost and serving.high-concurrency."""

from __future__ import annotations

from orchestrator.compatibility.memory_rules import (
    concurrency_at_max_context,
    high_concurrency,
    over_budget,
    speculation_cost,
)
from orchestrator.compatibility.rule import CompatContext, Finding
from orchestrator.engines.capabilities import release_for
from orchestrator.errors import EXIT_OVER_BUDGET
from orchestrator.memory.budget import estimate_memory
from orchestrator.profile.schema import Profile
from tests.unit.memory.conftest import EAGLE3_8B, LLAMA_8B, make_profile


def _ctx(profile: Profile, *, with_memory: bool = True, target: bool = True) -> CompatContext:
    info = LLAMA_8B if target else None
    memory = estimate_memory(profile, info, EAGLE3_8B) if with_memory else None
    release = release_for(profile.engine.name, profile.engine.version)
    return CompatContext(
        profile=profile, release=release, target=info, draft=EAGLE3_8B, memory=memory
    )


class TestOverBudget:
    def test_fires_when_one_sequence_does_not_fit_with_breakdown_fix_and_exit_5(self) -> None:
        profile = make_profile(hardware={"gpu": "L4"}, serving={"max_model_len": 131072})
        [finding] = over_budget(_ctx(profile))
        assert finding.severity == "error"
        assert finding.exit_code == EXIT_OVER_BUDGET
        assert "one sequence of max_model_len=131072 needs" in finding.what
        assert "target weights 15.0 + draft weights 0.8" in finding.what
        assert "refuses to start" in finding.why
        assert finding.fix.startswith("set ")

    def test_passes_when_it_fits(self) -> None:
        profile = make_profile(serving={"max_model_len": 8192, "max_concurrency": 4})
        assert over_budget(_ctx(profile)) == []

    def test_passes_when_only_the_concurrency_falls_short(self) -> None:
        profile = make_profile(serving={"max_model_len": 131072, "max_concurrency": 16})
        assert over_budget(_ctx(profile)) == []

    def test_info_when_no_estimate(self) -> None:
        profile = make_profile(hardware={"device": "cpu", "gpu": None})
        [finding] = over_budget(_ctx(profile, with_memory=False))
        assert finding.severity == "info"
        assert "device is cpu" in finding.what

    def test_info_names_an_unresolved_target(self) -> None:
        [finding] = over_budget(_ctx(make_profile(), with_memory=False, target=False))
        assert "was not resolved" in finding.what


class TestConcurrencyAtMaxContext:
    def test_warns_with_both_numbers_when_fewer_full_length_sequences_fit(self) -> None:
        profile = make_profile(serving={"max_model_len": 131072, "max_concurrency": 16})
        ctx = _ctx(profile)
        assert ctx.memory is not None
        [finding] = concurrency_at_max_context(ctx)
        assert finding.severity == "warning" and finding.rule == "memory.concurrency-at-max-context"
        assert f"only {ctx.memory.max_concurrency} sequences" in finding.what
        assert f"({ctx.memory.baseline_max_concurrency} without)" in finding.what
        assert "typical_context_tokens" in finding.fix

    def test_names_how_many_typical_requests_fit(self) -> None:
        serving = {"max_model_len": 131072, "max_concurrency": 16, "typical_context_tokens": 2048}
        [finding] = concurrency_at_max_context(_ctx(make_profile(serving=serving)))
        assert "at serving.typical_context_tokens=2048" in finding.what

    def test_passes_when_the_concurrency_fits(self) -> None:
        profile = make_profile(serving={"max_model_len": 8192, "max_concurrency": 4})
        assert concurrency_at_max_context(_ctx(profile)) == []

    def test_does_not_apply_when_the_engine_would_not_start(self) -> None:
        profile = make_profile(hardware={"gpu": "L4"}, serving={"max_model_len": 131072})
        assert concurrency_at_max_context(_ctx(profile)) == []


class TestSpeculationCost:
    def test_fires_on_a_long_context_profile(self) -> None:
        profile = make_profile(
            hardware={"gpu": "L40S"}, serving={"max_model_len": 16384, "max_concurrency": 1}
        )
        ctx = _ctx(profile)
        assert ctx.memory is not None
        assert ctx.memory.max_concurrency < ctx.memory.baseline_max_concurrency
        [finding] = speculation_cost(ctx)
        assert finding.severity == "warning"
        assert "(baseline)" in finding.what

    def test_passes_for_ngram(self) -> None:
        profile = make_profile(proposer={"method": "ngram"})
        ctx = CompatContext(
            profile=profile,
            release=release_for("vllm", "0.32.0"),
            target=LLAMA_8B,
            memory=estimate_memory(profile, LLAMA_8B, None),
        )
        assert speculation_cost(ctx) == []

    def test_does_not_apply_without_memory_or_speculation(self) -> None:
        assert speculation_cost(_ctx(make_profile(), with_memory=False)) == []
        baseline = make_profile(proposer={"method": "none"})
        assert speculation_cost(_ctx(baseline)) == []


class TestHighConcurrency:
    def test_fires_past_the_critical_batch(self) -> None:
        profile = make_profile(serving={"max_concurrency": 128})  # 128 x 4 = 512 > 295 on H100
        [finding] = high_concurrency(_ctx(profile, with_memory=False))
        assert isinstance(finding, Finding) and finding.severity == "warning"
        assert "512 tokens" in finding.what

    def test_passes_at_low_concurrency(self) -> None:
        profile = make_profile(serving={"max_concurrency": 8})
        assert high_concurrency(_ctx(profile, with_memory=False)) == []

    def test_does_not_apply_to_a_baseline(self) -> None:
        profile = make_profile(proposer={"method": "none"}, serving={"max_concurrency": 256})
        assert high_concurrency(_ctx(profile, with_memory=False)) == []
