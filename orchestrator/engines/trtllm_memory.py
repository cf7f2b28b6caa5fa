"""TensorRT-LLM's memory model: `kv_cache_config.free_gpu_memory_fraction` is the share of the
memory still free after the weights load and the warm-up that goes to the KV cache."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Final

from orchestrator.engines.base import Collectives
from orchestrator.memory.knobs import MIN_ENGINE_FRACTION, round_down_fraction
from orchestrator.memory.kv import StateSlots
from orchestrator.memory.overheads import NON_TORCH_GIB, nccl_gib
from orchestrator.memory.weights import WeightSharding

if TYPE_CHECKING:
    from orchestrator.checkpoint.info import CheckpointInfo
    from orchestrator.memory.estimate import MemoryEstimate
    from orchestrator.memory.gpus import Gpu
    from orchestrator.memory.kv import KvPool
    from orchestrator.profile.schema import Profile

#: trtllm-serve --max_num_tokens default (BuildConfig.max_num_tokens; explicit in
#: BaseLlmArgs from 1.2.0). Without chunked prefill a prompt longer than this is rejected
#: ("The sum of prompt length ... should not exceed max_num_tokens",
#: https://github.com/NVIDIA/TensorRT-LLM/issues/9277).
DEFAULT_MAX_NUM_TOKENS: Final = 8192
#: About 60 MB per captured graph (https://github.com/NVIDIA/TensorRT-LLM/pull/3362 review),
#: default cuda_graph_config.max_batch_size 128 -> 8 power-of-two sizes ~ 0.5 GiB.
CUDA_GRAPH_GIB: Final = 0.5
#: Warm-up logits: fp32 logits and probabilities (not verified upstream: no public log to fit).
LOGITS_BYTES_PER_ENTRY: Final = 8


class TrtllmMemory:
    """TensorRT-LLM: `free_gpu_memory_fraction`, KV's share of memory left after weights."""

    knob: ClassVar[str] = "kv_cache_config.free_gpu_memory_fraction"

    def knob_without_estimate(self, profile: Profile) -> float:
        # TensorRT-LLM's own default is 0.9 of free memory; the profile's share is no larger.
        return round_down_fraction(profile.serving.gpu_memory_fraction)

    def knob_for(self, estimate: MemoryEstimate) -> float:
        free_after_warmup = _free_after_warmup(estimate)
        if free_after_warmup <= 0:
            return MIN_ENGINE_FRACTION
        return round_down_fraction(estimate.kv_cache_gib / free_after_warmup)

    def kv_gib_at(self, estimate: MemoryEstimate, knob: float) -> float:
        return knob * _free_after_warmup(estimate)

    def profiled_tokens(self, profile: Profile, gpu: Gpu) -> int:
        del gpu
        return effective_max_num_tokens(profile)

    def sampler_bytes_per_logit(self, profile: Profile) -> float:
        del profile
        return LOGITS_BYTES_PER_ENTRY

    def cuda_graph_gib(self, profile: Profile, target: CheckpointInfo, gpu: Gpu) -> float:
        del profile, target, gpu
        return CUDA_GRAPH_GIB

    def graphs_in_budget(self, profile: Profile) -> bool:
        del profile
        return True

    def weight_sharding(self, profile: Profile) -> WeightSharding:
        # enable_attention_dp keeps the attention of every rank whole; MoE and dense layers stay
        # split over tensor_parallel_size (or moe_expert_parallel_size).
        hardware = profile.hardware
        tp = hardware.tensor_parallel_size
        return WeightSharding(
            attention=hardware.attention_tensor_parallel_size, dense=tp, experts=tp
        )

    def non_torch_gib(self, profile: Profile) -> float:
        del profile
        return NON_TORCH_GIB

    def collectives(self, profile: Profile, target: CheckpointInfo, gpu: Gpu) -> Collectives:
        # aiconfigurator's nccl_mem was measured for TensorRT-LLM; no TensorRT-LLM log separates
        # NVLink from PCIe boards, so both get it.
        del target, gpu
        return Collectives(init_gib=nccl_gib(profile.hardware.tensor_parallel_size))

    def in_flight_tokens(self, profile: Profile, gpu: Gpu) -> int:
        del gpu
        return effective_max_num_tokens(profile)

    def state_slots(self, profile: Profile) -> StateSlots:
        # TensorRT-LLM's Mamba cache manager and speculation: not modelled (one state per
        # sequence, no copies per draft token).
        del profile
        return StateSlots()

    def logged_kv_tokens(self, profile: Profile, pool: KvPool) -> int:
        del profile
        return pool.capacity_tokens


def _free_after_warmup(e: MemoryEstimate) -> float:
    weights = e.target_weights_gib + e.draft_weights_gib
    return e.gpu_usable_gib - weights - e.overheads.activation_gib - e.overheads.before_load_gib


def effective_max_num_tokens(profile: Profile) -> int:
    """Tokens per iteration the engine is started with (the size of its warm-up forward pass):
    trtllm.max_num_tokens when set, else large enough for a max_model_len prompt in one pass."""
    tuning = profile.trtllm
    if tuning is not None and tuning.max_num_tokens is not None:
        return tuning.max_num_tokens
    return max(DEFAULT_MAX_NUM_TOKENS, profile.serving.max_model_len)
