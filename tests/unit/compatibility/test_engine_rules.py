"""Engine rules: fires / passes / does not apply, for each rule."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from orchestrator.checkpoint.info import CheckpointInfo
from orchestrator.compatibility.engine_rules import (
    attention_data_parallel_is_supported,
    draft_tensor_parallel_is_accepted,
    engine_supports_method,
    engine_version_is_known,
    extra_args_do_not_override_managed_flags,
    extra_args_use_no_removed_flag,
    kv_cache_dtype_is_spelled,
    kv_cache_dtype_runs_on_gpu,
    pipeline_parallel_allows_speculation,
)
from orchestrator.compatibility.rule import CompatContext, Finding
from orchestrator.engines.capabilities import release_for
from orchestrator.engines.sglang_rules import (
    sglang_draft_tokens_are_consistent,
    sglang_overlap_needs_topk_one,
)
from orchestrator.engines.vllm_rules import cpu_memory_fraction_is_modest
from orchestrator.memory.gpus import gpu_catalog
from tests.support import make_profile

SGLANG = {"name": "sglang", "version": "0.5.23"}


def ctx(target: CheckpointInfo | None = None, **sections: Any) -> CompatContext:
    profile = make_profile(**sections)
    release = release_for(profile.engine.name, profile.engine.version)
    return CompatContext(profile=profile, release=release, target=target)


def only(findings: list[Finding]) -> Finding:
    assert len(findings) == 1, findings
    return findings[0]


class TestEngineVersionIsKnown:
    def test_warns_for_a_newer_release(self) -> None:
        finding = only(engine_version_is_known(ctx(engine={"name": "vllm", "version": "0.99.0"})))
        assert finding.severity == "warning" and "0.32.0" in finding.what

    def test_silent_for_a_known_release(self) -> None:
        assert engine_version_is_known(ctx()) == []


class TestEngineSupportsMethod:
    def test_draft_model_needs_vllm_015(self) -> None:
        finding = only(engine_supports_method(ctx(engine={"name": "vllm", "version": "0.12.0"})))
        assert finding.rule == "engine.method-supported" and finding.severity == "error"
        assert "'draft_model' is not supported by vllm 0.12.0" in finding.what
        assert "0.15.0 or newer" in finding.fix

    def test_trtllm_has_no_eagle1(self) -> None:
        sections = {
            "engine": {"name": "trtllm", "version": "1.2.1"},
            "proposer": {"method": "eagle", "model": "org/h", "num_speculative_tokens": 3},
        }
        assert "not supported by trtllm" in only(engine_supports_method(ctx(**sections))).what

    def test_passes_for_supported_method(self) -> None:
        assert engine_supports_method(ctx()) == []

    def test_eagle3_target_architecture(self) -> None:
        proposer = {"method": "eagle3", "model": "org/head", "num_speculative_tokens": 3}
        bad = CheckpointInfo(
            ref="x", source="catalog", location="", architectures=("FancyForCausalLM",)
        )
        finding = only(engine_supports_method(ctx(bad, proposer=proposer)))
        assert "FancyForCausalLM has no eagle3 support" in finding.what
        good = CheckpointInfo(
            ref="x", source="catalog", location="", architectures=("LlamaForCausalLM",)
        )
        assert engine_supports_method(ctx(good, proposer=proposer)) == []

    def test_does_not_apply_to_baseline(self) -> None:
        assert engine_supports_method(ctx(proposer={"method": "none"})) == []


class TestDraftTensorParallelIsAccepted:
    def test_draft_model_needs_equal_tp(self) -> None:
        sections = {
            "hardware": {"gpu": "H100-80GB", "tensor_parallel_size": 2},
            "proposer": {
                "method": "draft_model",
                "model": "d",
                "num_speculative_tokens": 3,
                "draft_tensor_parallel_size": 1,
            },
        }
        finding = only(draft_tensor_parallel_is_accepted(ctx(**sections)))
        assert (
            "draft_tensor_parallel_size=1" in finding.what
            and "tensor_parallel_size=2" in finding.what
        )

    def test_eagle_accepts_one_or_target_tp(self) -> None:
        proposer = {
            "method": "eagle3",
            "model": "h",
            "num_speculative_tokens": 3,
            "draft_tensor_parallel_size": 1,
        }
        assert (
            draft_tensor_parallel_is_accepted(
                ctx(hardware={"gpu": "H100-80GB", "tensor_parallel_size": 4}, proposer=proposer)
            )
            == []
        )
        proposer["draft_tensor_parallel_size"] = 2
        assert only(
            draft_tensor_parallel_is_accepted(
                ctx(hardware={"gpu": "H100-80GB", "tensor_parallel_size": 4}, proposer=proposer)
            )
        )

    def test_sglang_has_no_draft_tp(self) -> None:
        proposer = {
            "method": "draft_model",
            "model": "d",
            "num_speculative_tokens": 3,
            "draft_tensor_parallel_size": 1,
        }
        assert (
            "has no draft TP"
            in only(draft_tensor_parallel_is_accepted(ctx(engine=SGLANG, proposer=proposer))).what
        )

    def test_does_not_apply_without_draft_tp(self) -> None:
        assert draft_tensor_parallel_is_accepted(ctx()) == []


class TestSglangOverlapNeedsTopkOne:
    """By release, from each release's code: 0.5.11-0.5.12 fall back to spec v1 for trees."""

    OVERLAP_V1: ClassVar[dict[str, str]] = {"name": "sglang", "version": "0.5.12"}

    def test_tree_with_overlap_warns_on_the_releases_that_fall_back(self) -> None:
        tuning = {"eagle_topk": 4, "num_draft_tokens": 8}
        finding = only(sglang_overlap_needs_topk_one(ctx(engine=self.OVERLAP_V1, sglang=tuning)))
        assert finding.rule == "engine.sglang-overlap-topk" and finding.severity == "warning"
        assert "disable_overlap_schedule: true" in finding.fix and "0.5.13" in finding.fix

    def test_does_not_apply_from_the_v2_tree_worker_on(self) -> None:
        for version in ("0.5.13", "0.5.23"):
            engine = {"name": "sglang", "version": version}
            tuning = {"eagle_topk": 4, "num_draft_tokens": 16}
            assert sglang_overlap_needs_topk_one(ctx(engine=engine, sglang=tuning)) == []

    def test_tree_without_overlap_passes(self) -> None:
        tuning = {"eagle_topk": 4, "num_draft_tokens": 8, "disable_overlap_schedule": True}
        assert sglang_overlap_needs_topk_one(ctx(engine=self.OVERLAP_V1, sglang=tuning)) == []

    def test_chain_passes(self) -> None:
        assert sglang_overlap_needs_topk_one(ctx(engine=self.OVERLAP_V1)) == []

    def test_does_not_apply_before_the_overlap_scheduler(self) -> None:
        old = {"name": "sglang", "version": "0.5.10"}
        tuning = {"eagle_topk": 4, "num_draft_tokens": 8}
        assert sglang_overlap_needs_topk_one(ctx(engine=old, sglang=tuning)) == []


class TestSglangDraftTokensAreConsistent:
    def test_chain_value_is_rewritten_so_it_warns(self) -> None:
        finding = only(
            sglang_draft_tokens_are_consistent(ctx(engine=SGLANG, sglang={"num_draft_tokens": 9}))
        )
        assert finding.severity == "warning" and "sglang.num_draft_tokens: 5" in finding.fix

    def test_a_tree_without_tokens_warns_what_is_rendered(self) -> None:
        tuning = {"eagle_topk": 2}
        finding = only(sglang_draft_tokens_are_consistent(ctx(engine=SGLANG, sglang=tuning)))
        assert finding.severity == "warning" and "renders 5 (steps + 1)" in finding.what

    def test_sglangs_documented_eagle3_tree_passes(self) -> None:
        # docs: --speculative-num-steps 3 --speculative-eagle-topk 4 --speculative-num-draft-tokens 16
        proposer = {"method": "eagle3", "model": "org/head", "num_speculative_tokens": 3}
        tuning = {"eagle_topk": 4, "num_draft_tokens": 16}
        assert (
            sglang_draft_tokens_are_consistent(ctx(engine=SGLANG, proposer=proposer, sglang=tuning))
            == []
        )

    def test_more_tokens_than_the_tree_has_candidates_is_refused(self) -> None:
        # 4 steps x topk 2: 1 + 2 + 3 x 4 = 15 at most.
        tuning = {"eagle_topk": 2, "num_draft_tokens": 16}
        finding = only(sglang_draft_tokens_are_consistent(ctx(engine=SGLANG, sglang=tuning)))
        assert finding.severity == "error" and "at most 15 (1 + 2 + 3 x 2^2)" in finding.what
        tuning["num_draft_tokens"] = 15
        assert sglang_draft_tokens_are_consistent(ctx(engine=SGLANG, sglang=tuning)) == []

    def test_does_not_apply_to_ngram(self) -> None:
        proposer = {"method": "ngram", "num_speculative_tokens": 3}
        assert (
            sglang_draft_tokens_are_consistent(
                ctx(engine=SGLANG, proposer=proposer, sglang={"num_draft_tokens": 9})
            )
            == []
        )


class TestPipelineParallelAllowsSpeculation:
    def test_sglang_refuses_pp_with_speculation(self) -> None:
        hardware = {"gpu": "H100-80GB", "pipeline_parallel_size": 2}
        assert (
            only(
                pipeline_parallel_allows_speculation(ctx(engine=SGLANG, hardware=hardware))
            ).severity
            == "error"
        )

    def test_vllm_eagle3_with_pp_passes(self) -> None:
        hardware = {"gpu": "H100-80GB", "pipeline_parallel_size": 2}
        proposer = {"method": "eagle3", "model": "h", "num_speculative_tokens": 3}
        assert pipeline_parallel_allows_speculation(ctx(hardware=hardware, proposer=proposer)) == []

    def test_does_not_apply_to_baseline(self) -> None:
        hardware = {"gpu": "H100-80GB", "pipeline_parallel_size": 2}
        assert (
            pipeline_parallel_allows_speculation(
                ctx(hardware=hardware, proposer={"method": "none"})
            )
            == []
        )


class TestExtraArgsUseNoRemovedFlag:
    def test_legacy_speculative_model_flag(self) -> None:
        finding = only(
            extra_args_use_no_removed_flag(
                ctx(serving={"extra_args": ["--speculative-model", "x"]})
            )
        )
        assert finding.rule == "engine.removed-flag"
        assert "--speculative-model" in finding.what and "0.8.3" in finding.what
        assert "proposer.model" in finding.fix

    def test_equals_form_is_recognised(self) -> None:
        assert only(
            extra_args_use_no_removed_flag(
                ctx(serving={"extra_args": ["--num-speculative-tokens=5"]})
            )
        )

    def test_current_flags_pass(self) -> None:
        assert (
            extra_args_use_no_removed_flag(ctx(serving={"extra_args": ["--enable-prefix-caching"]}))
            == []
        )


class TestExtraArgsDoNotOverrideManagedFlags:
    def test_managed_flag_is_refused(self) -> None:
        finding = only(
            extra_args_do_not_override_managed_flags(
                ctx(serving={"extra_args": ["--max-model-len", "4096"]})
            )
        )
        assert finding.rule == "engine.managed-flag" and "--max-model-len" in finding.what
        assert "set `serving.max_model_len` in the profile" in finding.fix

    @pytest.mark.parametrize(
        ("engine", "flag", "field"),
        [
            (
                {"name": "vllm", "version": "0.32.0"},
                "--gpu-memory-utilization",
                "serving.gpu_memory_fraction",
            ),
            (
                {"name": "sglang", "version": "0.5.23"},
                "--speculative-eagle-topk",
                "sglang.eagle_topk",
            ),
            ({"name": "trtllm", "version": "1.2.1"}, "--max_num_tokens", "trtllm.max_num_tokens"),
        ],
    )
    def test_fix_names_the_profile_field_per_engine(
        self, engine: dict[str, str], flag: str, field: str
    ) -> None:
        finding = only(
            extra_args_do_not_override_managed_flags(
                ctx(engine=engine, serving={"extra_args": [flag, "1"]})
            )
        )
        assert f"`{field}`" in finding.fix

    def test_a_flag_specdeploy_always_sets_says_so(self) -> None:
        finding = only(
            extra_args_do_not_override_managed_flags(ctx(serving={"extra_args": ["--host", "x"]}))
        )
        assert "specdeploy sets it" in finding.fix

    def test_negative_numbers_are_not_flags(self) -> None:
        assert (
            extra_args_do_not_override_managed_flags(ctx(serving={"extra_args": ["--seed", "-1"]}))
            == []
        )

    def test_removed_flags_are_left_to_the_removed_flag_rule(self) -> None:
        assert (
            extra_args_do_not_override_managed_flags(
                ctx(serving={"extra_args": ["--speculative-model", "x"]})
            )
            == []
        )


class TestAttentionDataParallelIsSupported:
    def test_trtllm_runs_one_attention_group_per_gpu_or_none(self) -> None:
        trtllm = {"name": "trtllm", "version": "1.2.1"}
        hardware = {"tensor_parallel_size": 8, "attention_data_parallel_size": 4}
        finding = only(attention_data_parallel_is_supported(ctx(engine=trtllm, hardware=hardware)))
        assert finding.severity == "error" and "1 or 8" in finding.fix
        hardware["attention_data_parallel_size"] = 8
        assert attention_data_parallel_is_supported(ctx(engine=trtllm, hardware=hardware)) == []

    def test_vllm_and_sglang_take_any_divisor(self) -> None:
        hardware = {"tensor_parallel_size": 8, "attention_data_parallel_size": 4}
        assert attention_data_parallel_is_supported(ctx(hardware=hardware)) == []
        assert attention_data_parallel_is_supported(ctx(engine=SGLANG, hardware=hardware)) == []

    def test_does_not_apply_without_groups(self) -> None:
        trtllm = {"name": "trtllm", "version": "1.2.1"}
        assert attention_data_parallel_is_supported(ctx(engine=trtllm)) == []


class TestKvCacheDtypeIsSpelled:
    def test_sglang_has_no_float16_kv_cache(self) -> None:
        finding = only(
            kv_cache_dtype_is_spelled(ctx(engine=SGLANG, serving={"kv_cache_dtype": "float16"}))
        )
        assert finding.rule == "engine.kv-cache-dtype" and "'float16'" in finding.what
        assert "fp8_e4m3" in finding.fix

    def test_trtllm_has_no_fp8_e5m2(self) -> None:
        trt = {"name": "trtllm", "version": "1.2.1"}
        assert only(
            kv_cache_dtype_is_spelled(ctx(engine=trt, serving={"kv_cache_dtype": "fp8_e5m2"}))
        )

    def test_every_engine_spells_auto_and_fp8(self) -> None:
        for engine in (
            {"name": "vllm", "version": "0.32.0"},
            SGLANG,
            {"name": "trtllm", "version": "1.2.1"},
        ):
            for dtype in ("auto", "fp8"):
                assert (
                    kv_cache_dtype_is_spelled(ctx(engine=engine, serving={"kv_cache_dtype": dtype}))
                    == []
                )


CPU = {"device": "cpu", "gpu": None}


class TestCpuMemoryFractionIsModest:
    def test_gpu_default_on_cpu_warns(self) -> None:
        finding = only(cpu_memory_fraction_is_modest(ctx(hardware=CPU)))
        assert finding.severity == "warning" and "host memory" in finding.what

    def test_small_share_passes(self) -> None:
        assert (
            cpu_memory_fraction_is_modest(ctx(hardware=CPU, serving={"gpu_memory_fraction": 0.15}))
            == []
        )

    def test_does_not_apply_on_gpu(self) -> None:
        assert cpu_memory_fraction_is_modest(ctx()) == []


def _checkpoint(ref: str, **fields: Any) -> CheckpointInfo:
    return CheckpointInfo(ref=ref, source="catalog", location="test", **fields)


#: A dense GQA target and an MLA target (kv_lora_rank marks multi-head latent attention).
GQA = _checkpoint("meta-llama/Llama-3.1-8B-Instruct", num_key_value_heads=8)
MLA = _checkpoint("deepseek-ai/DeepSeek-V3", kv_lora_rank=512)
TRTLLM = {"name": "trtllm", "version": "1.2.0"}


def fp8_on(
    engine: dict[str, str], gpu: str, target: CheckpointInfo | None, dtype: str = "fp8"
) -> list[Finding]:
    sections: dict[str, Any] = {
        "engine": engine,
        "hardware": {"gpu": gpu},
        "serving": {"kv_cache_dtype": dtype},
    }
    if engine["name"] == "trtllm":
        sections["proposer"] = {"method": "ngram"}
    return kv_cache_dtype_runs_on_gpu(ctx(target, **sections))


class TestKvCacheDtypeRunsOnGpu:
    """vLLM refuses what its backend selection refuses; SGLang and TensorRT-LLM get warnings
    where nothing confirms the combination; supported architectures stay silent."""

    VLLM: ClassVar = {"name": "vllm", "version": "0.32.0"}

    def test_vllm_refuses_fp8_below_sm80(self) -> None:
        finding = only(fp8_on(self.VLLM, "T4", GQA))
        assert (finding.rule, finding.severity) == ("engine.kv-cache-dtype-gpu", "error")
        assert "T4 (sm75)" in finding.what and "Triton" in finding.what
        assert finding.field == "serving.kv_cache_dtype"
        assert "triton_attn.py#L486-L500" in finding.source
        assert "kv_cache_dtype: auto" in finding.fix

    def test_vllm_refuses_mla_fp8_on_ampere_but_not_gqa(self) -> None:
        finding = only(fp8_on(self.VLLM, "A100-80GB", MLA))
        assert finding.severity == "error" and "MLA" in finding.what
        assert "triton_mla.py" in finding.source
        assert fp8_on(self.VLLM, "A100-80GB", GQA) == []  # FlashInfer reads fp8 on SM 8.0

    def test_vllm_refuses_fp8_e5m2_for_mla_everywhere(self) -> None:
        finding = only(fp8_on(self.VLLM, "H200", MLA, dtype="fp8_e5m2"))
        assert finding.severity == "error" and "fp8_e4m3" in finding.fix

    def test_vllm_unknown_attention_on_ampere_is_a_warning(self) -> None:
        assert only(fp8_on(self.VLLM, "A10G", None)).severity == "warning"

    def test_older_vllm_release_is_only_warned(self) -> None:
        finding = only(fp8_on({"name": "vllm", "version": "0.15.0"}, "T4", GQA))
        assert finding.severity == "warning" and "this release was not checked" in finding.what

    @pytest.mark.parametrize("gpu", ["L4", "H100-80GB", "B200", "RTX-5090"])
    def test_vllm_accepts_fp8_from_sm89(self, gpu: str) -> None:
        assert fp8_on(self.VLLM, gpu, MLA) == [] and fp8_on(self.VLLM, gpu, GQA) == []

    def test_amd_is_unverified_for_every_engine(self) -> None:
        for engine in (self.VLLM, SGLANG, TRTLLM):
            assert only(fp8_on(engine, "MI300X", GQA)).severity == "warning", engine

    def test_sglang_warns_for_mla_below_sm89(self) -> None:
        finding = only(fp8_on(SGLANG, "A100-80GB", MLA, dtype="fp8_e4m3"))
        assert finding.severity == "warning" and "Triton" in finding.what
        assert "model_override_base.py" in finding.source
        assert fp8_on(SGLANG, "A100-80GB", GQA, dtype="fp8_e4m3") == []

    def test_sglang_fp8_e5m2_on_hopper_falls_back_to_triton(self) -> None:
        finding = only(fp8_on(SGLANG, "H100-80GB", GQA, dtype="fp8_e5m2"))
        assert finding.severity == "warning" and "fp8_e4m3" in finding.fix
        assert fp8_on(SGLANG, "H100-80GB", GQA, dtype="fp8_e4m3") == []

    def test_trtllm_follows_its_support_matrix(self) -> None:
        assert fp8_on(TRTLLM, "A100-80GB", MLA) == []
        finding = only(fp8_on(TRTLLM, "T4", GQA))
        assert finding.severity == "warning" and "quantization.html" in finding.source

    def test_does_not_apply_without_fp8_or_on_cpu(self) -> None:
        assert fp8_on(self.VLLM, "T4", GQA, dtype="auto") == []
        cpu = ctx(GQA, hardware={"device": "cpu"}, serving={"kv_cache_dtype": "fp8"})
        assert kv_cache_dtype_runs_on_gpu(cpu) == []

    def test_trtllm_unspelled_dtype_is_left_to_the_spelling_rule(self) -> None:
        assert fp8_on(TRTLLM, "T4", GQA, dtype="fp8_e5m2") == []


def test_every_gpu_has_an_architecture_with_a_source() -> None:
    for gpu in gpu_catalog().values():
        assert (gpu.compute_capability is None) != (gpu.gfx_arch is None), gpu.name
        assert gpu.compute_capability_source.startswith("https://"), gpu.name
    assert gpu_catalog()["RTX-5090"].compute_capability == (12, 0)
    assert gpu_catalog()["L4"].arch_name == "sm89"
