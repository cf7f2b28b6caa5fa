"""The per-GPU estimate, each engine's fraction semantics, asymmetric draft TP and suggestions."""

from __future__ import annotations

import dataclasses

import pytest

from orchestrator.errors import ProfileError
from orchestrator.memory.budget import (
    MemoryEstimate,
    engine_kv_gib,
    engine_memory_fraction,
    estimate_memory,
)
from orchestrator.memory.gpus import find_gpu, gpu_catalog
from orchestrator.memory.report import gpu_table, memory_table
from tests.unit.memory.conftest import DEEPSEEK_V3, EAGLE3_8B, LLAMA_8B, make_profile


def _engine(name: str, version: str) -> dict[str, str]:
    return {"name": name, "version": version}


class TestEstimate:
    def test_itemised_llama_eagle3_on_h100(self) -> None:
        e = estimate_memory(make_profile(), LLAMA_8B, EAGLE3_8B)
        assert e is not None
        assert e.target_weights_gib == pytest.approx(14.96, abs=0.01)
        assert e.draft_weights_gib == pytest.approx(0.79, abs=0.01)
        assert (e.target_kv_bytes_per_token, e.draft_kv_bytes_per_token) == (131072, 4096)
        fixed = e.target_weights_gib + e.draft_weights_gib + e.overhead_gib
        assert e.kv_cache_gib == pytest.approx(e.budget_gib - fixed)
        assert e.max_concurrency <= e.baseline_max_concurrency
        assert set(e.as_json()) >= {"gpu", "budget_gib", "kv_tokens", "fits", "suggestions"}

    def test_long_context_short_of_concurrency_starts_and_suggests_fixes_that_fit(self) -> None:
        profile = make_profile(serving={"max_model_len": 131072, "max_concurrency": 16})
        e = estimate_memory(profile, LLAMA_8B, EAGLE3_8B)
        assert e is not None and e.fits and e.one_sequence_fits
        assert not e.concurrency_fits and e.max_concurrency < 16
        assert e.one_sequence_gib < e.budget_gib < e.needed_gib
        assert e.suggestions
        for s in e.suggestions:
            assert s.max_concurrency >= 16 or s.change.startswith("serving.max_concurrency")

    def test_fp8_kv_is_offered_only_where_the_engine_runs_it_on_that_gpu(self) -> None:
        # An 8B target at 32k is short of concurrency on a T4 and on an L4, and an fp8 KV cache
        # would fit it on both. SGLang has no checked fp8 KV path below SM 8.0
        # (`engine.kv-cache-dtype-gpu` warns), so on the T4 the fix must not propose it; on the
        # L4 (SM 8.9) it is the cheapest fix.
        for gpu, concurrency, offered in (("T4", 3, False), ("L4", 8, True)):
            sections = {
                "engine": _engine("sglang", "0.5.23"),
                "hardware": {"gpu": gpu, "tensor_parallel_size": 2},
                "proposer": {"method": "ngram"},
            }
            serving = {"max_model_len": 32768, "max_concurrency": concurrency}
            e = estimate_memory(make_profile(serving=serving, **sections), LLAMA_8B, None)
            assert e is not None and not e.concurrency_fits, gpu
            fp8 = make_profile(serving={**serving, "kv_cache_dtype": "fp8"}, **sections)
            with_fp8 = estimate_memory(fp8, LLAMA_8B, None)
            assert with_fp8 is not None and with_fp8.meets_request, gpu
            changes = [s.change for s in e.suggestions]
            assert ("serving.kv_cache_dtype: fp8" in changes) is offered, (gpu, changes)

    def test_typical_context_fits_more_requests(self) -> None:
        serving = {"max_model_len": 131072, "max_concurrency": 16, "typical_context_tokens": 4096}
        e = estimate_memory(make_profile(serving=serving), LLAMA_8B, EAGLE3_8B)
        assert e is not None and e.typical_concurrency is not None
        assert e.typical_concurrency >= 16 * e.max_concurrency
        assert e.baseline_typical_concurrency is not None
        assert e.baseline_typical_concurrency >= e.typical_concurrency
        assert e.as_json()["typical_concurrency"] == e.typical_concurrency

    def test_an_eagle_head_without_its_attention_shape_costs_one_target_layer(self) -> None:
        bare = dataclasses.replace(EAGLE3_8B, num_attention_heads=None, num_key_value_heads=None)
        profile = make_profile()
        known = estimate_memory(profile, LLAMA_8B, EAGLE3_8B)
        guessed = estimate_memory(profile, LLAMA_8B, bare)
        assert known is not None and guessed is not None
        assert guessed.draft_kv_bytes_per_token == known.draft_kv_bytes_per_token == 4096
        assert any("counted as one decoder layer" in note for note in guessed.notes)

    def test_an_unresolved_eagle_head_is_never_free(self) -> None:
        e = estimate_memory(make_profile(), LLAMA_8B, None)
        assert e is not None and e.draft_kv_bytes_per_token == 4096  # 2 x 8 x 128 x 2 B
        assert any("counted as one decoder layer of the target's shape" in n for n in e.notes)

    def test_draft_at_tp1_makes_rank0_heaviest(self) -> None:
        sharded = make_profile(hardware={"gpu": "H100-80GB", "tensor_parallel_size": 4})
        rank0 = make_profile(
            hardware={"gpu": "H100-80GB", "tensor_parallel_size": 4},
            proposer={"method": "draft_model", "model": "d", "draft_tensor_parallel_size": 1},
        )
        shared = estimate_memory(sharded, LLAMA_8B, EAGLE3_8B)
        alone = estimate_memory(rank0, LLAMA_8B, LLAMA_8B)
        assert shared is not None and alone is not None
        assert alone.heaviest_rank.startswith("rank 0")
        assert alone.draft_weights_gib == pytest.approx(14.96, abs=0.01)  # whole draft on rank 0
        assert alone.draft_kv_bytes_per_token == 131072  # all 8 KV heads on that rank
        assert alone.target_kv_bytes_per_token == 32768

    def test_mtp_layers_are_draft_weights_and_kv(self) -> None:
        profile = make_profile(
            target={"model": "deepseek-ai/DeepSeek-V3"},
            proposer={"method": "mtp"},
            hardware={"gpu": "H200", "tensor_parallel_size": 8},
        )
        e = estimate_memory(profile, DEEPSEEK_V3, None)
        assert e is not None
        assert e.draft_kv_bytes_per_token == 1152
        assert e.target_kv_bytes_per_token == 70272
        assert e.draft_weights_gib > 1.0

    def test_ngram_has_no_draft_memory(self) -> None:
        profile = make_profile(proposer={"method": "ngram"})
        e = estimate_memory(profile, LLAMA_8B, None)
        assert e is not None
        assert (e.draft_weights_gib, e.draft_kv_bytes_per_token) == (0.0, 0)
        assert e.max_concurrency == e.baseline_max_concurrency

    def test_cpu_and_unresolved_give_none(self) -> None:
        cpu = make_profile(hardware={"device": "cpu", "gpu": None})
        assert estimate_memory(cpu, LLAMA_8B, None) is None
        assert estimate_memory(make_profile(), None, None) is None

    def test_unknown_gpu_says_did_you_mean(self) -> None:
        with pytest.raises(ProfileError) as err:
            find_gpu("H100-80G")
        assert "did you mean" in err.value.fix


class TestEngineFraction:
    def test_vllm_is_the_profile_fraction_since_0_21(self) -> None:
        profile = make_profile(engine=_engine("vllm", "0.32.0"))
        assert engine_memory_fraction(profile, estimate_memory(profile, LLAMA_8B, EAGLE3_8B)) == 0.9

    def test_vllm_before_0_21_leaves_room_for_graphs(self) -> None:
        profile = make_profile(engine=_engine("vllm", "0.20.0"))
        e = estimate_memory(profile, LLAMA_8B, EAGLE3_8B)
        assert e is not None
        expected = 0.9 - e.overheads.cuda_graph_gib / e.gpu_usable_gib
        assert engine_memory_fraction(profile, e) == pytest.approx(expected, abs=0.001)

    def test_sglang_static_fraction_covers_weights_and_kv(self) -> None:
        profile = make_profile(engine=_engine("sglang", "0.5.0"))
        e = estimate_memory(profile, LLAMA_8B, EAGLE3_8B)
        assert e is not None
        static = e.target_weights_gib + e.draft_weights_gib + e.kv_cache_gib
        # a share of the memory free before weights load: usable minus CUDA context and NCCL
        free_before_load = e.gpu_usable_gib - e.overheads.non_torch_gib - e.overheads.nccl_gib
        assert engine_memory_fraction(profile, e) == pytest.approx(
            static / free_before_load, abs=0.001
        )

    def test_trtllm_fraction_is_of_memory_free_after_weights(self) -> None:
        profile = make_profile(engine=_engine("trtllm", "1.2.0"))
        e = estimate_memory(profile, LLAMA_8B, EAGLE3_8B)
        assert e is not None
        o = e.overheads
        free = (
            e.gpu_usable_gib
            - e.target_weights_gib
            - e.draft_weights_gib
            - o.activation_gib
            - o.non_torch_gib
            - o.nccl_gib
        )
        fraction = engine_memory_fraction(profile, e)
        assert fraction * free == pytest.approx(e.kv_cache_gib, abs=0.001 * free)
        assert fraction < 0.9  # same budget, different semantics

    @pytest.mark.parametrize(
        ("engine", "expected"),
        [(_engine("vllm", "0.32.0"), 0.9), (_engine("sglang", "0.5.0"), 0.88)],
    )
    def test_fallback_without_estimate(self, engine: dict[str, str], expected: float) -> None:
        assert engine_memory_fraction(make_profile(engine=engine), None) == expected

    def test_trtllm_fallback_is_the_profile_fraction(self) -> None:
        profile = make_profile(
            engine=_engine("trtllm", "1.2.0"), serving={"gpu_memory_fraction": 0.8}
        )
        assert engine_memory_fraction(profile, None) == 0.8


class TestReport:
    def test_table_shows_breakdown_both_concurrencies_and_verdict(self) -> None:
        profile = make_profile(serving={"max_model_len": 131072, "max_concurrency": 16})
        e = estimate_memory(profile, LLAMA_8B, EAGLE3_8B)
        assert e is not None
        text = memory_table(e)
        assert "draft weights (eagle3)" in text
        assert f"{e.max_concurrency} with speculation, {e.baseline_max_concurrency} without" in text
        assert (
            f"verdict: starts, but only {e.max_concurrency} of serving.max_concurrency=16" in text
        )
        assert "fix: " in text

    def test_table_says_over_budget_when_one_sequence_does_not_fit(self) -> None:
        profile = make_profile(hardware={"gpu": "L4"}, serving={"max_model_len": 131072})
        e = estimate_memory(profile, LLAMA_8B, EAGLE3_8B)
        assert e is not None and not e.fits
        assert "verdict: over budget: not even one sequence of max_model_len fits" in memory_table(
            e
        )

    def test_gpu_table_lists_every_gpu_with_its_label(self) -> None:
        text = gpu_table(list(gpu_catalog().values()))
        assert "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3" in text
        assert len(text.splitlines()) == len(gpu_catalog()) + 1


class TestEngineKv:
    """`engine_kv_gib` inverts the knob translation: the rendered knob gives back the estimate."""

    @pytest.mark.parametrize("tp", [1, 2, 4])
    @pytest.mark.parametrize(
        "engine",
        [
            _engine("vllm", "0.32.0"),
            _engine("vllm", "0.20.0"),
            _engine("vllm", "0.10.2"),
            _engine("sglang", "0.5.0"),
            _engine("trtllm", "1.2.0"),
        ],
    )
    def test_rendered_knob_gives_back_the_kv_estimate(
        self, engine: dict[str, str], tp: int
    ) -> None:
        profile = make_profile(
            engine=engine, hardware={"gpu": "H100-80GB", "tensor_parallel_size": tp}
        )
        e = estimate_memory(profile, LLAMA_8B, EAGLE3_8B)
        assert e is not None
        # the knob is rounded down to 3 decimals: at most 0.001 of usable memory is lost
        kv = engine_kv_gib(e, e.engine_fraction)
        assert e.kv_cache_gib - 0.001 * e.gpu_usable_gib <= kv <= e.kv_cache_gib + 1e-9

    def test_vllm_sampler_cost_follows_the_release(self) -> None:
        """V0 shows no sampler peak, V1 sorts (40 B/logit) until 0.17's Triton top-k/top-p."""
        profile = {"serving": {"max_concurrency": 1024}}
        sizes = {
            version: estimate_memory(
                make_profile(engine=_engine("vllm", version), **profile), LLAMA_8B, None
            )
            for version in ("0.6.4", "0.16.0", "0.17.0")
        }
        sampler = {v: e.overheads.sampler_gib for v, e in sizes.items() if e is not None}
        entries = 1024 * 128256
        assert sampler["0.6.4"] == pytest.approx(entries * 2 / 2**30)
        assert sampler["0.16.0"] == pytest.approx(entries * 40 / 2**30)
        assert sampler["0.17.0"] == pytest.approx(entries * 15.3 / 2**30)
        for e in sizes.values():
            assert e is not None
            o = e.overheads
            assert o.activation_gib == max(o.forward_gib, o.sampler_gib)


class TestAttentionDataParallel:
    """DeepSeek-R1 (MLA: one latent per token, not split by TP) on 8 x H200: with attention data
    parallelism each GPU keeps only its own requests' latents, so the replica holds about eight
    times the sequences, less what the replicated attention weights cost."""

    @staticmethod
    def r1(engine: dict[str, str], groups: int) -> MemoryEstimate:
        from orchestrator.checkpoint.catalog import catalog_info

        target = catalog_info("deepseek-ai/DeepSeek-R1")
        assert target is not None
        profile = make_profile(
            engine=engine,
            target={"model": "deepseek-ai/DeepSeek-R1"},
            proposer={"method": "mtp", "num_speculative_tokens": 1},
            hardware={
                "gpu": "H200",
                "tensor_parallel_size": 8,
                "attention_data_parallel_size": groups,
                "expert_parallel": groups > 1,
            },
            serving={"max_model_len": 32768, "max_concurrency": 256},
        )
        e = estimate_memory(profile, target, None)
        assert e is not None
        return e

    @pytest.mark.parametrize(
        "engine",
        [
            {"name": "vllm", "version": "0.32.0"},
            {"name": "sglang", "version": "0.5.23"},
            {"name": "trtllm", "version": "1.2.1"},
        ],
    )
    def test_groups_multiply_the_sequences_the_replica_holds(self, engine: dict[str, str]) -> None:
        tp, dp = self.r1(engine, 1), self.r1(engine, 8)
        assert dp.target_weights_gib > tp.target_weights_gib  # attention copied per group
        assert dp.kv_bytes_per_token == tp.kv_bytes_per_token  # MLA latent: not split either way
        assert 4 * tp.max_concurrency < dp.max_concurrency < 8 * tp.max_concurrency
        assert dp.as_json()["attention_data_parallel_size"] == 8

    def test_gqa_heads_split_over_one_group_only(self) -> None:
        tp = estimate_memory(
            make_profile(hardware={"gpu": "H100-80GB", "tensor_parallel_size": 8}),
            LLAMA_8B,
            EAGLE3_8B,
        )
        dp = estimate_memory(
            make_profile(
                hardware={
                    "gpu": "H100-80GB",
                    "tensor_parallel_size": 8,
                    "attention_data_parallel_size": 2,
                }
            ),
            LLAMA_8B,
            EAGLE3_8B,
        )
        assert tp is not None and dp is not None
        # 8 KV heads over 8 GPUs: 1 per GPU; over a group of 4: 2 per GPU.
        assert dp.target_kv_bytes_per_token == 2 * tp.target_kv_bytes_per_token
