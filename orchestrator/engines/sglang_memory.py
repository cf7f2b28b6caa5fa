"""SGLang's memory model: `--mem-fraction-static` is the share of weights + KV cache in the memory
free before the weights load (activations and CUDA graphs live outside it); chunked prefill and
the decode graphs' largest batch default by GPU memory band."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Final

from orchestrator.memory.gpus import GIB, by_memory_band
from orchestrator.memory.knobs import round_down_fraction
from orchestrator.memory.weights import WeightSharding

if TYPE_CHECKING:
    from orchestrator.checkpoint.info import CheckpointInfo
    from orchestrator.memory.budget import MemoryEstimate
    from orchestrator.memory.gpus import Gpu
    from orchestrator.profile.schema import Profile

#: SGLang's own mem_fraction_static for a GPU it cannot size (the fallback when the device memory
#: is unknown), used as a ceiling when no estimate exists.
UNKNOWN_GPU_FRACTION: Final = 0.88
#: chunked_prefill_size default by GPU memory band (GiB upper bound, tokens)
#: (`_handle_gpu_memory_settings`,
#: https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/arg_groups/memory_hook.py#L89-L170).
CHUNKED_PREFILL_BY_GIB: Final = ((20, 2048), (35, 2048), (60, 4096), (90, 8192), (160, 8192))
CHUNKED_PREFILL_LARGEST: Final = 16384
#: SGLang reserves about 2 MB per captured decode batch size, outside mem_fraction_static; the
#: default largest captured batch by GPU memory band (same source as above).
GRAPH_BYTES_PER_BATCH: Final = 2 * 1024**2
GRAPH_MAX_BS_BY_GIB: Final = ((20, 8), (35, 48), (60, 32), (90, 256), (160, 256))
GRAPH_MAX_BS_LARGEST: Final = 512
#: Warm-up logits: fp32 logits and probabilities (no public log to fit).
LOGITS_BYTES_PER_ENTRY: Final = 8


class SglangMemory:
    """SGLang: `mem_fraction_static`, weights + KV as a share of memory free before loading."""

    knob: ClassVar[str] = "mem_fraction_static"

    def knob_without_estimate(self, profile: Profile) -> float:
        return round_down_fraction(min(profile.serving.gpu_memory_fraction, UNKNOWN_GPU_FRACTION))

    def knob_for(self, estimate: MemoryEstimate) -> float:
        # SGLang sizes KV as free-after-load - pre_model_load_memory x (1 - mem_fraction_static),
        # where pre_model_load_memory is what was free before the weights loaded
        # (`_profile_available_bytes`, https://github.com/sgl-project/sglang/blob/v0.5.23/
        # python/sglang/srt/mem_cache/kv_cache_configurator.py), so the knob is the share of
        # weights + KV in memory not already taken by the CUDA context and NCCL.
        e = estimate
        static = e.target_weights_gib + e.draft_weights_gib + e.kv_cache_gib
        return round_down_fraction(static / (e.gpu_usable_gib - e.overheads.before_load_gib))

    def kv_gib_at(self, estimate: MemoryEstimate, knob: float) -> float:
        e = estimate
        weights = e.target_weights_gib + e.draft_weights_gib
        return (e.gpu_usable_gib - e.overheads.before_load_gib) * knob - weights

    def profiled_tokens(self, profile: Profile, gpu: Gpu) -> int:
        del profile
        return by_memory_band(gpu.memory_gib, CHUNKED_PREFILL_BY_GIB, CHUNKED_PREFILL_LARGEST)

    def sampler_bytes_per_logit(self, profile: Profile) -> float:
        del profile
        return LOGITS_BYTES_PER_ENTRY

    def cuda_graph_gib(self, profile: Profile, target: CheckpointInfo, gpu: Gpu) -> float:
        del target
        tuned = profile.sglang.cuda_graph_max_bs if profile.sglang else None
        max_bs = tuned or by_memory_band(gpu.memory_gib, GRAPH_MAX_BS_BY_GIB, GRAPH_MAX_BS_LARGEST)
        return max_bs * GRAPH_BYTES_PER_BATCH / GIB

    def graphs_in_budget(self, profile: Profile) -> bool:
        del profile
        return True

    def weight_sharding(self, profile: Profile) -> WeightSharding:
        # Attention data parallelism: "data-parallel attention groups inside the TP group ...
        # while the FFN stays tensor parallel" (https://github.com/sgl-project/sglang/blob/
        # v0.5.23/python/sglang/srt/arg_groups/fields/parallel.py#L80-L90).
        hardware = profile.hardware
        tp = hardware.tensor_parallel_size
        return WeightSharding(
            attention=hardware.attention_tensor_parallel_size, dense=tp, experts=tp
        )
