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

    def test_a_resolved_target_that_cannot_be_sized_is_refused_not_passed(self) -> None:
        # Issue 23: Qwen3-235B-A22B-Instruct-2507's catalog facts lacked hidden_size / head_dim
        # (its card alone was quoted); validate used to exit 0 with no budget. It now says which
        # facts and what is known. The built-in entry has them now, so they are taken away.
        from dataclasses import replace

        from orchestrator.checkpoint.catalog import catalog_info

        model = "Qwen/Qwen3-235B-A22B-Instruct-2507"
        known = catalog_info(model)
        assert known is not None and known.hidden_size == 4096
        info = replace(
            known, hidden_size=None, head_dim=None, unverified=("hidden_size", "head_dim")
        )
        profile = make_profile(
            target={"model": model},
            proposer={"method": "ngram", "num_speculative_tokens": 3},
            hardware={"gpu": "H200", "tensor_parallel_size": 8},
        )
        assert estimate_memory(profile, info, None) is None
        release = release_for(profile.engine.name, profile.engine.version)
        ctx = CompatContext(profile=profile, release=release, target=info, draft=None, memory=None)
        [finding] = over_budget(ctx)
        assert finding.severity == "error"
        assert "does not give hidden_size" in finding.what and "head_dim" in finding.what
        assert "235.0 B published parameters" in finding.what
        assert "54.7 GiB on each of 8 GPUs" in finding.what
        assert "huggingface-cli download" in finding.fix


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

    def test_a_schedule_is_judged_at_the_draft_length_it_runs_at_that_load(self) -> None:
        head = {"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"}
        off = {**head, "num_speculative_tokens_per_batch_size": [[1, 32, 3], [33, 1024, 0]]}
        speculating = make_profile(proposer=off, serving={"max_concurrency": 32})
        assert high_concurrency(_ctx(speculating, with_memory=False)) == []  # 32 x 4 = 128
        off_at_load = make_profile(proposer=off, serving={"max_concurrency": 128})
        assert high_concurrency(_ctx(off_at_load, with_memory=False)) == []  # k 0 at 128
        lowered = {**head, "num_speculative_tokens_per_batch_size": [[1, 32, 3], [33, 1024, 2]]}
        profile = make_profile(proposer=lowered, serving={"max_concurrency": 128})
        [finding] = high_concurrency(_ctx(profile, with_memory=False))
        assert (
            "serving.max_concurrency=128 x (the draft length "
            "proposer.num_speculative_tokens_per_batch_size schedules there=2 + 1) = 384 tokens"
        ) in finding.what
        assert "k: 0 turns speculation off there" in finding.fix
