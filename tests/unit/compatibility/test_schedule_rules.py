"""Draft-length schedule rules (proposer.num_speculative_tokens_per_batch_size): fires / passes /
does not apply, for each rule, with the messages. vLLM's own verdict on the same schedules is
checked in tests/conformance/test_vllm_conformance.py (TestDraftLengthSchedule)."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from orchestrator.compatibility import check_compatibility
from orchestrator.compatibility.rule import CompatContext, Finding
from orchestrator.compatibility.schedule_rules import (
    SCHEDULE_FIELD,
    schedule_is_supported,
    schedule_needs_a_proposer,
)
from orchestrator.engines.capabilities import release_for
from orchestrator.engines.sglang_rules import (
    sglang_adaptive_config_is_served,
    sglang_schedule_adapts,
)
from orchestrator.engines.vllm_rules import (
    schedule_is_valid,
    schedule_off_is_not_the_baseline,
    schedule_runs_without_data_parallelism,
    schedule_stays_within_the_draft_length,
)
from orchestrator.profile.issues import ProfileInvalid
from tests.support import make_profile

GOOD = [[1, 8, 4], [9, 64, 2], [65, 1024, 0]]


def proposer(schedule: list[list[int]] | None = GOOD, **fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "method": "draft_model",
        "model": "Qwen/Qwen3-0.6B",
        "num_speculative_tokens": 4,
        **fields,
    }
    if schedule is not None:
        out["num_speculative_tokens_per_batch_size"] = schedule
    return out


def ctx(schedule: list[list[int]] | None = GOOD, **sections: Any) -> CompatContext:
    sections.setdefault("proposer", proposer(schedule))
    profile = make_profile(**sections)
    return CompatContext(
        profile=profile, release=release_for(profile.engine.name, profile.engine.version)
    )


def only(findings: list[Finding]) -> Finding:
    assert len(findings) == 1, findings
    return findings[0]


class TestScheduleIsSupported:
    def test_passes_on_vllm_0320_and_newer(self) -> None:
        assert schedule_is_supported(ctx()) == []
        assert schedule_is_supported(ctx(engine={"name": "vllm", "version": "0.33.1"})) == []

    def test_an_older_vllm_is_not_verified_a_warning(self) -> None:
        finding = only(schedule_is_supported(ctx(engine={"name": "vllm", "version": "0.21.0"})))
        assert finding.rule == "engine.spec-schedule-supported"
        assert finding.severity == "warning" and finding.field == SCHEDULE_FIELD
        assert f"{SCHEDULE_FIELD} on vllm 0.21.0: not verified" in finding.what
        assert "against vLLM 0.32.0's code only" in finding.what
        assert (
            "forbid unknown keys" in finding.what and "refuses --speculative-config" in finding.why
        )
        assert "engine.version to 0.32.0 or newer" in finding.fix
        assert "v0.32.0/vllm/config/speculative.py#L490-L496" in finding.source

    def test_sglang_0523_reads_one_through_its_adaptive_slots(self) -> None:
        assert schedule_is_supported(ctx(engine={"name": "sglang", "version": "0.5.23"})) == []

    def test_an_older_sglang_is_not_verified_a_warning(self) -> None:
        finding = only(schedule_is_supported(ctx(engine={"name": "sglang", "version": "0.5.14"})))
        assert finding.severity == "warning" and finding.field == SCHEDULE_FIELD
        assert f"{SCHEDULE_FIELD} on sglang 0.5.14: not verified" in finding.what
        assert "in SGLang 0.5.23's code only" in finding.what
        assert "engine.version to 0.5.23 or newer" in finding.fix
        assert "v0.5.23/python/sglang/srt/speculative/adaptive_spec_params.py" in finding.source

    @pytest.mark.parametrize("version", ["1.0.0", "1.2.1", "1.3.0rc21"])
    def test_trtllm_is_not_mapped_an_error(self, version: str) -> None:
        sections = {
            "engine": {"name": "trtllm", "version": version},
            "proposer": proposer(method="eagle3", model="org/head"),
        }
        finding = only(schedule_is_supported(ctx(**sections)))
        assert finding.severity == "error"
        assert f"TensorRT-LLM {version}" in finding.what and "draft_len_schedule" in finding.what
        assert "TensorRT-LLM" in finding.source and "llm_args.html" in finding.source

    def test_does_not_apply_without_a_schedule_or_without_a_proposer(self) -> None:
        assert (
            schedule_is_supported(ctx(None, engine={"name": "sglang", "version": "0.5.23"})) == []
        )
        baseline = {"method": "none", "num_speculative_tokens_per_batch_size": GOOD}
        assert schedule_is_supported(ctx(proposer=baseline)) == []


class TestScheduleNeedsAProposer:
    def test_a_baseline_with_a_schedule_is_refused(self) -> None:
        baseline = {"method": "none", "num_speculative_tokens_per_batch_size": GOOD}
        finding = only(schedule_needs_a_proposer(ctx(proposer=baseline)))
        assert finding.rule == "engine.spec-schedule-baseline" and finding.severity == "error"
        assert finding.what == f"{SCHEDULE_FIELD} has 3 range(s) but proposer.method is 'none'"
        assert "silently dropped" in finding.why and f"remove {SCHEDULE_FIELD}" in finding.fix
        assert finding.field == SCHEDULE_FIELD

    def test_does_not_apply_to_a_speculative_profile_or_a_plain_baseline(self) -> None:
        assert schedule_needs_a_proposer(ctx()) == []
        assert schedule_needs_a_proposer(ctx(proposer={"method": "none"})) == []


class TestScheduleIsValid:
    def test_a_valid_schedule_passes_in_any_order(self) -> None:
        assert schedule_is_valid(ctx()) == []
        assert schedule_is_valid(ctx(list(reversed(GOOD)))) == []  # vLLM sorts by range_start
        assert schedule_is_valid(ctx([[1, 1, 4], [4, 8, 2]])) == []  # a gap is allowed

    def test_a_bound_of_zero_is_not_positive(self) -> None:
        finding = only(schedule_is_valid(ctx([[1, 4, 4], [0, 8, 2]])))
        assert finding.rule == "engine.spec-schedule-valid" and finding.severity == "error"
        assert finding.field == f"{SCHEDULE_FIELD}[1]"
        assert finding.what == (
            f"{SCHEDULE_FIELD}[1]=[0, 8, 2]: vLLM refuses it with "
            "'Batch-size range (0, 8) must be positive.'"
        )
        assert "engine core starts" in finding.why and "server exits" in finding.why
        assert finding.fix == f"edit {SCHEDULE_FIELD}[1]: make both bounds 1 or more"

    def test_a_start_above_its_end(self) -> None:
        finding = only(schedule_is_valid(ctx([[1, 4, 4], [9, 5, 2]])))
        assert "'Batch-size range start must be <= end for (9, 5, 2).'" in finding.what
        assert finding.fix.endswith("write it as [5, 9, 2]")

    def test_overlapping_ranges_name_the_one_overlapped(self) -> None:
        finding = only(schedule_is_valid(ctx([[1, 4, 4], [4, 8, 2]])))
        assert finding.field == f"{SCHEDULE_FIELD}[1]"
        assert "(it overlaps [1, 4, 4])" in finding.what
        assert "'Batch-size ranges must be non-overlapping and sorted.'" in finding.what
        assert finding.fix.endswith("start it at 5, after [1, 4, 4] ends")

    def test_an_overlap_beyond_the_neighbour_is_found(self) -> None:
        # Sorted: [1, 100], [5, 6], [50, 60]: the last overlaps the first, not its neighbour.
        found = schedule_is_valid(ctx([[1, 100, 4], [5, 6, 2], [50, 60, 1]]))
        assert [f.field for f in found] == [f"{SCHEDULE_FIELD}[1]", f"{SCHEDULE_FIELD}[2]"]
        assert all("overlaps [1, 100, 4]" in f.what for f in found)

    def test_the_first_range_must_start_at_1(self) -> None:
        finding = only(schedule_is_valid(ctx([[2, 8, 4], [9, 16, 2]])))
        assert finding.field == f"{SCHEDULE_FIELD}[0]"
        assert "'The first batch-size range must start at 1 so every runtime batch size" in (
            finding.what
        )
        assert finding.fix.endswith("start it at 1 (not 2)")

    def test_every_problem_is_reported_in_vllm_s_order(self) -> None:
        found = schedule_is_valid(ctx([[0, 3, 1], [70, 65, 0], [5, 8, 2], [8, 9, 1]]))
        assert [f.field.rsplit("[", 1)[1] for f in found] == ["0]", "1]", "3]"]
        assert "must be positive" in found[0].what and "start must be <= end" in found[1].what
        assert "non-overlapping" in found[2].what
        # [0, 3] was refused and may be the range meant to come first: no start-at-1 finding.
        assert not any("start at 1" in f.what for f in found)

    def test_does_not_apply_without_a_schedule(self) -> None:
        assert schedule_is_valid(ctx(None)) == []

    def test_is_a_vllm_rule_only(self) -> None:
        sglang = ctx([[2, 8, 4]], engine={"name": "sglang", "version": "0.5.23"})
        rules = {f.rule for f in check_compatibility(sglang)}
        assert "engine.sglang-schedule-adapts" in rules  # a STANDALONE draft: one k
        assert "engine.spec-schedule-valid" not in rules


class TestScheduleStaysWithinTheDraftLength:
    def test_a_k_above_num_speculative_tokens_is_clamped_a_warning(self) -> None:
        found = schedule_stays_within_the_draft_length(ctx([[1, 8, 6], [9, 16, 4], [17, 64, 5]]))
        assert [f.field for f in found] == [f"{SCHEDULE_FIELD}[0]", f"{SCHEDULE_FIELD}[2]"]
        first = found[0]
        assert first.rule == "engine.spec-schedule-clamped" and first.severity == "warning"
        assert first.what == (
            f"{SCHEDULE_FIELD}[0]=[1, 8, 6]: k=6 is above proposer.num_speculative_tokens=4"
        )
        assert "batch sizes 1-8 draft 4 tokens per step, not 6" in first.why
        assert first.fix == (
            "set the entry's k to at most 4, or raise proposer.num_speculative_tokens to 6"
        )

    def test_k_up_to_num_speculative_tokens_passes(self) -> None:
        assert schedule_stays_within_the_draft_length(ctx([[1, 8, 4], [9, 16, 0]])) == []

    def test_does_not_apply_without_a_schedule(self) -> None:
        assert schedule_stays_within_the_draft_length(ctx(None)) == []


class TestScheduleRunsWithoutDataParallelism:
    DP2: ClassVar[dict[str, Any]] = {
        "gpu": "H100-80GB",
        "tensor_parallel_size": 2,
        "attention_data_parallel_size": 2,
    }

    def test_data_parallel_ranks_drop_the_schedule_a_warning(self) -> None:
        finding = only(schedule_runs_without_data_parallelism(ctx(hardware=self.DP2)))
        assert finding.rule == "engine.spec-schedule-data-parallel"
        assert finding.severity == "warning" and finding.field == SCHEDULE_FIELD
        assert "hardware.attention_data_parallel_size=2 (vLLM --data-parallel-size 2)" in (
            finding.what
        )
        assert "proposer.num_speculative_tokens=4 tokens per step" in finding.why
        assert "hardware.attention_data_parallel_size: 1" in finding.fix
        assert "config/vllm.py#L1058-L1075" in finding.source

    def test_passes_without_data_parallelism(self) -> None:
        tp2 = {"gpu": "H100-80GB", "tensor_parallel_size": 2}
        assert schedule_runs_without_data_parallelism(ctx(hardware=tp2)) == []

    def test_does_not_apply_without_a_schedule(self) -> None:
        assert schedule_runs_without_data_parallelism(ctx(None, hardware=self.DP2)) == []


class TestScheduleOffIsNotTheBaseline:
    """Measured on the CPU test bed (tests/e2e/test_tune_vllm.py): with a 64-token budget and 64
    sequences, the k = 0 range drafted nothing and served 0.7x of the baseline."""

    TIGHT: ClassVar[dict[str, Any]] = {"max_num_batched_tokens": 64}
    SERVING: ClassVar[dict[str, Any]] = {"max_model_len": 4096, "max_concurrency": 64}
    OFF: ClassVar[list[list[int]]] = [[1, 1, 4], [2, 64, 0]]

    def test_a_k_of_0_under_a_budget_below_twice_the_sequences_is_a_warning(self) -> None:
        found = ctx(self.OFF, vllm=self.TIGHT, serving=self.SERVING)
        finding = only(schedule_off_is_not_the_baseline(found))
        assert finding.rule == "engine.spec-schedule-off-budget"
        assert finding.severity == "warning" and finding.field == SCHEDULE_FIELD
        assert "vllm.max_num_batched_tokens=64 below 2 x serving.max_concurrency=64" in finding.what
        assert "at most 32 decodes where the target alone holds 64" in finding.why
        assert "vllm.max_num_batched_tokens to at least 128" in finding.fix

    def test_a_budget_of_twice_the_sequences_a_schedule_without_0_or_ngram_pass(self) -> None:
        roomy = ctx(self.OFF, vllm={"max_num_batched_tokens": 128}, serving=self.SERVING)
        assert schedule_off_is_not_the_baseline(roomy) == []
        always_on = ctx([[1, 1, 4], [2, 64, 2]], vllm=self.TIGHT, serving=self.SERVING)
        assert schedule_off_is_not_the_baseline(always_on) == []
        ngram = proposer(self.OFF, method="ngram", model=None)
        assert (
            schedule_off_is_not_the_baseline(
                ctx(vllm=self.TIGHT, serving=self.SERVING, proposer=ngram)
            )
            == []
        )
        assert schedule_off_is_not_the_baseline(ctx(self.OFF, serving=self.SERVING)) == []


SGLANG = {"name": "sglang", "version": "0.5.23"}


class TestSglangScheduleAdapts:
    """SGLang 0.5.23 adapts EAGLE, EAGLE3 and NEXTN chains only (adaptive_unsupported_reason);
    its own controller running the rendered slots is tests/conformance/test_variants.py."""

    def eagle3(self, schedule: list[list[int]] = GOOD) -> dict[str, Any]:
        return proposer(schedule, method="eagle3", model="yuhuili/EAGLE3-LLaMA3.1-Instruct-8B")

    def test_an_eagle3_chain_adapts(self) -> None:
        assert sglang_schedule_adapts(ctx(engine=SGLANG, proposer=self.eagle3())) == []

    def test_a_standalone_draft_runs_one_k_a_warning(self) -> None:
        finding = only(sglang_schedule_adapts(ctx(engine=SGLANG)))
        assert finding.rule == "engine.sglang-schedule-adapts"
        assert finding.severity == "warning" and finding.field == SCHEDULE_FIELD
        assert "--speculative-algorithm STANDALONE does not adapt" in finding.what
        assert "runs k=4 at every load" in finding.why
        assert f"remove {SCHEDULE_FIELD}" in finding.fix and "eagle_topk: 1" in finding.fix

    def test_a_tree_and_attention_data_parallelism_run_one_k(self) -> None:
        tree = ctx(engine=SGLANG, proposer=self.eagle3(), sglang={"eagle_topk": 4,
                   "num_draft_tokens": 8, "disable_overlap_schedule": True})  # fmt: skip
        assert "only topk 1 chains adapt" in only(sglang_schedule_adapts(tree)).what
        hardware = {"gpu": "H100-80GB", "tensor_parallel_size": 2,
                    "attention_data_parallel_size": 2}  # fmt: skip
        split = ctx(engine=SGLANG, proposer=self.eagle3(), hardware=hardware)
        assert "attention data parallelism" in only(sglang_schedule_adapts(split)).what

    def test_a_schedule_of_zeros_leaves_nothing_to_start_with(self) -> None:
        zeros = ctx(engine=SGLANG, proposer=self.eagle3([[1, 64, 0]]))
        assert "every range has k=0" in only(sglang_schedule_adapts(zeros)).what

    def test_does_not_apply_before_0523_or_without_a_schedule(self) -> None:
        older = ctx(engine={"name": "sglang", "version": "0.5.14"})
        assert "engine.sglang-schedule-adapts" not in {f.rule for f in check_compatibility(older)}
        plain = ctx(None, engine=SGLANG)
        assert "engine.sglang-schedule-adapts" not in {f.rule for f in check_compatibility(plain)}

    def test_sglang_adaptive_on_a_draft_that_does_not_adapt_names_its_field(self) -> None:
        adaptive = ctx(None, engine=SGLANG, sglang={"adaptive": {}})
        finding = only(sglang_schedule_adapts(adaptive))
        assert finding.field == "sglang.adaptive" and "STANDALONE does not adapt" in finding.what
        assert "sglang.adaptive is not used" in finding.why


class TestSglangAdaptiveConfigIsServed:
    """sglang.adaptive as SGLang 0.5.23 starts it (`_init_adaptive_speculative_params`); the same
    launches refereed by SGLang's own parser are in tests/conformance/test_variants.py."""

    HEAD: ClassVar[dict[str, Any]] = {
        "method": "eagle3",
        "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
    }

    def adaptive(self, k: int, adaptive: dict[str, Any], **sections: Any) -> CompatContext:
        sections.setdefault("engine", SGLANG)
        head = {**self.HEAD, "num_speculative_tokens": k}
        return ctx(None, proposer=head, sglang={"adaptive": adaptive}, **sections)

    def test_a_start_among_the_candidates_passes(self) -> None:
        slots = {"slots": [{"batch_size": 1, "candidate_steps": [1, 3]}]}
        assert sglang_adaptive_config_is_served(self.adaptive(3, slots)) == []
        # SGLang's default config: slots of [1, 3, 5, 7], [0, 1, 3], [0, 1] and [0]
        assert sglang_adaptive_config_is_served(self.adaptive(5, {})) == []

    def test_a_start_that_is_no_candidate_is_refused(self) -> None:
        slots = {"slots": [{"batch_size": 1, "candidate_steps": [1, 3]}]}
        finding = only(sglang_adaptive_config_is_served(self.adaptive(2, slots)))
        assert finding.severity == "error" and finding.field == "sglang.adaptive"
        assert "proposer.num_speculative_tokens=2" in finding.what and "(1, 3)" in finding.what
        assert "refuses to start" in finding.why and "one of 1, 3" in finding.fix
        default = only(sglang_adaptive_config_is_served(self.adaptive(4, {})))
        assert "SGLang's default config (0, 1, 3, 5, 7)" in default.what

    def test_a_schedule_beside_it_is_refused(self) -> None:
        both = self.adaptive(3, {})
        profile = both.profile.model_copy(
            update={
                "proposer": both.profile.proposer.model_copy(
                    update={"num_speculative_tokens_per_batch_size": ((1, 8, 3),)}
                )
            }
        )
        findings = sglang_adaptive_config_is_served(
            CompatContext(profile=profile, release=both.release)
        )
        assert [f.severity for f in findings] == ["error"]
        assert "both set" in findings[0].what

    def test_another_release_is_a_warning_that_says_it_was_not_read(self) -> None:
        older = self.adaptive(3, {}, engine={"name": "sglang", "version": "0.5.14"})
        finding = only(sglang_adaptive_config_is_served(older))
        assert finding.severity == "warning" and "not verified" in finding.what

    def test_does_not_apply_to_a_baseline(self) -> None:
        baseline = ctx(None, proposer={"method": "none"}, engine=SGLANG,
                       sglang={"adaptive": {}})  # fmt: skip
        rules = {f.rule for f in check_compatibility(baseline)}
        assert "engine.sglang-adaptive-config" not in rules

    def test_repeated_batch_sizes_are_refused_when_the_profile_loads(self) -> None:
        with pytest.raises(ProfileInvalid, match="batch_size 8 has more than one slot"):
            self.adaptive(3, {"slots": [{"batch_size": 8, "candidate_steps": [1]},
                                        {"batch_size": 8, "candidate_steps": [3]}]})  # fmt: skip
