"""vLLM's memory model: `--gpu-memory-utilization` is a share of total GPU memory covering
weights, activations, KV and (from v0.21) CUDA graphs; what its profile run and sampler warm-up
peak at, per release.

Releases modelled: the V0 engine (< 0.8) shows no sampler peak and profiles a whole prompt; V1
warms the sampler up over `max_num_seqs` requests by sorting until a cheaper warm-up (seen from
0.21); CUDA graphs move inside `gpu_memory_utilization` from 0.21.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Final

from orchestrator.engines.capabilities import parse_version
from orchestrator.memory.knobs import round_down_fraction
from orchestrator.memory.weights import WeightSharding

if TYPE_CHECKING:
    from orchestrator.checkpoint.info import CheckpointInfo
    from orchestrator.memory.budget import MemoryEstimate
    from orchestrator.memory.gpus import Gpu
    from orchestrator.profile.schema import Profile

#: vLLM V1 warms the sampler up over `max_num_seqs` dummy requests with top-k/top-p by sorting,
#: per (request x vocabulary) entry: bf16 logits 2 + fp32 logits 4 + temperature copy 4 + sorted
#: values 4 + int64 sort indices 8 + softmax 4 + cumsum 4 + scattered logits 4 + probs 4 +
#: exponential noise 4 = 42 B; we use 40. Evidence: "CUDA out of memory occurred when warming up
#: sampler with 1024 dummy requests" (https://github.com/vllm-project/vllm/issues/15617, v0.8.2);
#: Qwen3-235B-FP8 at TP4 on H100 (https://github.com/vllm-project/vllm/issues/21348, ~v0.9.2)
#: leaves 8.1 GiB of non-KV memory beyond the weights, which only a ~5.8 GiB sampler peak
#: (1024 x 151,936 x 40 B) comes close to explaining.
SORT_SAMPLER_BYTES_PER_LOGIT: Final = 40
#: Later vLLM warms the sampler up far more cheaply: a v0.21 Qwen3-8B log on a 24 GB card
#: (https://github.com/LMCache/LMCache/issues/3430) leaves at most ~0.5 GiB for activations with
#: 256 x 151,936 entries, i.e. <= 13.8 B/entry (fp32 logits + probs ~ 8-12 B). We take 12 B from
#: v0.21.0, the first release with a log showing it; the change lies somewhere in 0.9.3-0.21.0 and
#: releases in that window keep the sort-based cost (predicts less KV, the safe side).
LEAN_SAMPLER_BYTES_PER_LOGIT: Final = 12
LEAN_SAMPLER_FROM: Final = (0, 21, 0)
#: The V0 engine (< 0.8) has no separate sampler warm-up whose peak shows: the 35k-token
#: chunked-prefill run of https://github.com/vllm-project/vllm/issues/10517 peaks 0.06-0.09 GiB
#: above the weights with 256 x 128,256 entries, i.e. about the bf16 logits alone (2 B/entry).
V0_SAMPLER_BYTES_PER_LOGIT: Final = 2
#: V1 default max_num_batched_tokens for `vllm serve`: 8192 on GPUs with >= 70 GiB that are not
#: A100, else 2048 (`_set_default_args_v1`,
#: https://github.com/vllm-project/vllm/blob/v0.10.0/vllm/engine/arg_utils.py).
V1_BATCHED_TOKENS_LARGE_GPU: Final = 8192
V1_BATCHED_TOKENS_SMALL_GPU: Final = 2048
LARGE_GPU_GIB: Final = 70.0
#: The V1 engine (chunked prefill always on) is the default from v0.8.0; V0 profiled a whole
#: max_model_len prompt unless chunked prefill was enabled
#: (https://github.com/vllm-project/vllm/issues/8185, .../issues/10517 logs).
V1_DEFAULT_FROM: Final = (0, 8, 0)
#: V0 turned chunked prefill on by default above 32k tokens of context, with a 2048-token batch
#: (https://github.com/vllm-project/vllm/blob/v0.7.3/vllm/engine/arg_utils.py; the 35k run in
#: https://github.com/vllm-project/vllm/issues/10517 profiles less than the 29k one).
V0_CHUNKED_ABOVE_LEN: Final = 32768
V0_CHUNKED_BATCHED_TOKENS: Final = 2048
#: vLLM estimates CUDA-graph memory and subtracts it from the KV budget since v0.21.0 ("CUDA
#: graph memory profiling is enabled (default since v0.21.0)",
#: https://github.com/vllm-project/vllm/pull/30515); before, graphs were captured outside
#: `gpu_memory_utilization` (https://github.com/vllm-project/vllm/issues/17549).
GRAPHS_IN_BUDGET_FROM: Final = (0, 21, 0)
#: Logged estimates for dense models: 0.17 GiB (TP4,
#: https://github.com/noonghunna/club-3090/issues/127), 0.36 GiB (TP2,
#: https://github.com/gpustack/runner/issues/251), 0.52 GiB (Qwen3-8B TP1,
#: https://github.com/LMCache/LMCache/issues/3430). MoE models capture far more (4.7-16.9 GiB per
#: GPU for large MoE at TP8, https://github.com/vllm-project/vllm/pull/51590); 2 GiB is a middle
#: value.
CUDA_GRAPH_GIB_DENSE: Final = 0.5
CUDA_GRAPH_GIB_MOE: Final = 2.0


class VllmMemory:
    """vLLM: `gpu_memory_utilization`, a share of the total memory CUDA reports."""

    knob: ClassVar[str] = "gpu_memory_utilization"

    def knob_without_estimate(self, profile: Profile) -> float:
        return round_down_fraction(profile.serving.gpu_memory_fraction)

    def knob_for(self, estimate: MemoryEstimate) -> float:
        # The profile's share, less what vLLM captures outside its knob (graphs before 0.21).
        o = estimate.overheads
        outside = 0.0 if o.graphs_in_budget else o.cuda_graph_gib
        return round_down_fraction(estimate.gpu_memory_fraction - outside / estimate.gpu_usable_gib)

    def kv_gib_at(self, estimate: MemoryEstimate, knob: float) -> float:
        # usable x knob, less everything vLLM budgets inside it.
        o = estimate.overheads
        outside = 0.0 if o.graphs_in_budget else o.cuda_graph_gib
        weights = estimate.target_weights_gib + estimate.draft_weights_gib
        return estimate.gpu_usable_gib * knob - weights - (o.total_gib - outside)

    def profiled_tokens(self, profile: Profile, gpu: Gpu) -> int:
        tuned = profile.vllm.max_num_batched_tokens if profile.vllm else None
        if tuned:
            return tuned
        if parse_version(profile.engine.version) < V1_DEFAULT_FROM:
            if profile.serving.max_model_len > V0_CHUNKED_ABOVE_LEN:
                return V0_CHUNKED_BATCHED_TOKENS
            return max(profile.serving.max_model_len, profile.serving.max_concurrency)
        large = gpu.memory_gib >= LARGE_GPU_GIB and not gpu.name.startswith("A100")
        return V1_BATCHED_TOKENS_LARGE_GPU if large else V1_BATCHED_TOKENS_SMALL_GPU

    def sampler_bytes_per_logit(self, profile: Profile) -> float:
        version = parse_version(profile.engine.version)
        if version < V1_DEFAULT_FROM:
            return V0_SAMPLER_BYTES_PER_LOGIT
        if version < LEAN_SAMPLER_FROM:
            return SORT_SAMPLER_BYTES_PER_LOGIT
        return LEAN_SAMPLER_BYTES_PER_LOGIT

    def cuda_graph_gib(self, profile: Profile, target: CheckpointInfo, gpu: Gpu) -> float:
        del gpu
        if profile.vllm is not None and profile.vllm.enforce_eager:
            return 0.0
        return CUDA_GRAPH_GIB_MOE if target.num_experts else CUDA_GRAPH_GIB_DENSE

    def graphs_in_budget(self, profile: Profile) -> bool:
        return parse_version(profile.engine.version) >= GRAPHS_IN_BUDGET_FROM

    def weight_sharding(self, profile: Profile) -> WeightSharding:
        # --data-parallel-size N runs N full model replicas at TP / N; --enable-expert-parallel
        # spreads the experts over all their GPUs (https://github.com/vllm-project/vllm/blob/
        # v0.32.0/docs/serving/data_parallel_deployment.md).
        hardware = profile.hardware
        group = hardware.attention_tensor_parallel_size
        experts = hardware.tensor_parallel_size if hardware.expert_parallel else group
        return WeightSharding(attention=group, dense=group, experts=experts)
