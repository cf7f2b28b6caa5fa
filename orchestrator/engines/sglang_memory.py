"""SGLang's memory model: `--mem-fraction-static` is the share of weights + KV cache in the memory
free before the weights load (activations and CUDA graphs live outside it); chunked prefill and
the decode graphs' largest batch default by GPU memory band, TP size and release."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Final

from orchestrator.engines.base import Collectives
from orchestrator.engines.capabilities import parse_version
from orchestrator.engines.sglang_adaptive import adaptive_launch
from orchestrator.memory.gpus import GIB
from orchestrator.memory.knobs import round_down_fraction
from orchestrator.memory.kv import StateSlots
from orchestrator.memory.overheads import NON_TORCH_GIB, nccl_gib
from orchestrator.memory.weights import WeightSharding

if TYPE_CHECKING:
    from orchestrator.checkpoint.info import CheckpointInfo
    from orchestrator.memory.estimate import MemoryEstimate
    from orchestrator.memory.gpus import Gpu
    from orchestrator.memory.kv import KvPool
    from orchestrator.profile.schema import Profile

#: SGLang's own mem_fraction_static for a GPU it cannot size (the fallback when the device memory
#: is unknown), used as a ceiling when no estimate exists: 0.88 up to 0.5.19
#: (https://github.com/sgl-project/sglang/blob/v0.5.19/python/sglang/srt/arg_groups/memory_hook.py#L263-L267);
#: 0.5.20 raised it to 0.95
#: (https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/arg_groups/memory_hook.py#L324-L328).
UNKNOWN_GPU_FRACTION: Final = 0.88
#: SGLang reserves about 2 MB per captured decode batch size, outside mem_fraction_static
#: (`reserve_for_graph_mb`,
#: https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/arg_groups/memory_hook.py#L357-L368).
GRAPH_BYTES_PER_BATCH: Final = 2 * 1024**2
#: Warm-up logits: fp32 logits and probabilities (not verified upstream: no public log to fit).
LOGITS_BYTES_PER_ENTRY: Final = 8
#: On NVLink boards the parallel groups (NCCL communicators, custom all-reduce) take ~2 GiB per GPU
#: before the weights load: "Init torch distributed ends. mem usage=2.01 GB" on 7 of 8 H200 ranks
#: at TP 8, 1.77-1.96 on the others (SGLang GB = GiB;
#: https://github.com/sgl-project/sglang/pull/11716, description, 2025-10-16). SGLang measures the
#: memory free after that (`measure_pre_model_load_memory`,
#: https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/distributed/bootstrap.py#L192-L223),
#: so it shrinks the base mem_fraction_static multiplies. Without NVLink: aiconfigurator's figure.
NVLINK_INIT_GIB: Final = 2.0


@dataclass(frozen=True)
class _Band:
    """One GPU-memory band of SGLang's capacity defaults."""

    below_gib: float
    chunked_prefill: int
    graph_max_bs: int
    """Largest captured decode batch below TP 4."""
    graph_max_bs_tp4: int
    """...and at TP 4 or more."""


@dataclass(frozen=True)
class _Defaults:
    """A release's chunked-prefill and decode-graph defaults by GPU memory."""

    bands: tuple[_Band, ...]
    largest: _Band
    """Above the last band."""
    graph_bs_capped_by_running_requests: bool
    """The default max batch never exceeds --max-running-requests."""


#: (first release, its defaults), newest first. Sources, per release:
#: 0.4.9-0.5.2: chunked prefill 2048 below 35 GiB, 8192 below 160 GiB, else 16384; decode graphs
#:   up to 8 (80 at TP >= 4) below 35 GiB, else the capture list's largest, 160, 256 above 90 GiB
#:   and 512 above 156.25 GiB ("160 * 1000" MiB)
#:   (https://github.com/sgl-project/sglang/blob/v0.4.9/python/sglang/srt/server_args.py#L330-L352,
#:   https://github.com/sgl-project/sglang/blob/v0.4.9/python/sglang/srt/model_executor/cuda_graph_runner.py#L138-L163).
#: 0.5.3: bands at 20/35/60/90/160 GiB (`_handle_gpu_memory_settings`,
#:   https://github.com/sgl-project/sglang/blob/v0.5.3/python/sglang/srt/server_args.py#L567-L629).
#: 0.5.10: the 20-35 GiB band captures 24 below TP 4
#:   (https://github.com/sgl-project/sglang/blob/v0.5.10/python/sglang/srt/server_args.py#L1166-L1228).
#: 0.5.20: that band prefills 4096 and captures 48 / 160 (`_handle_gpu_memory_settings` moved to
#:   https://github.com/sgl-project/sglang/blob/v0.5.20/python/sglang/srt/arg_groups/memory_hook.py#L89-L179).
#: 0.5.22: the default max batch is capped at --max-running-requests
#:   (https://github.com/sgl-project/sglang/blob/v0.5.22/python/sglang/srt/arg_groups/memory_hook.py#L182-L188;
#:   the same in v0.5.23, https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/arg_groups/memory_hook.py#L89-L189).
_BANDS_0_5_3: Final = (
    _Band(20, 2048, 8, 8),
    _Band(35, 2048, 16, 80),
    _Band(60, 4096, 32, 160),
    _Band(90, 8192, 256, 512),
    _Band(160, 8192, 256, 512),
)
_BANDS_0_5_10: Final = (_BANDS_0_5_3[0], _Band(35, 2048, 24, 80), *_BANDS_0_5_3[2:])
_BANDS_0_5_20: Final = (_BANDS_0_5_3[0], _Band(35, 4096, 48, 160), *_BANDS_0_5_3[2:])
_LARGEST_0_5_3: Final = _Band(float("inf"), 16384, 512, 512)
DEFAULTS_BY_RELEASE: Final = (
    ((0, 5, 22), _Defaults(_BANDS_0_5_20, _LARGEST_0_5_3, True)),
    ((0, 5, 20), _Defaults(_BANDS_0_5_20, _LARGEST_0_5_3, False)),
    ((0, 5, 10), _Defaults(_BANDS_0_5_10, _LARGEST_0_5_3, False)),
    ((0, 5, 3), _Defaults(_BANDS_0_5_3, _LARGEST_0_5_3, False)),
    (
        (0, 0, 0),
        _Defaults(
            (_Band(35, 2048, 8, 80), _Band(90, 8192, 160, 160), _Band(156.25, 8192, 256, 256)),
            _Band(float("inf"), 16384, 512, 512),
            False,
        ),
    ),
)


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
        return _band(profile, gpu).chunked_prefill

    def sampler_bytes_per_logit(self, profile: Profile) -> float:
        del profile
        return LOGITS_BYTES_PER_ENTRY

    def cuda_graph_gib(self, profile: Profile, target: CheckpointInfo, gpu: Gpu) -> float:
        del target
        tuned = profile.sglang.cuda_graph_max_bs if profile.sglang else None
        return (tuned or default_graph_max_bs(profile, gpu)) * GRAPH_BYTES_PER_BATCH / GIB

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

    def non_torch_gib(self, profile: Profile) -> float:
        del profile
        return NON_TORCH_GIB

    def collectives(self, profile: Profile, target: CheckpointInfo, gpu: Gpu) -> Collectives:
        del target
        tp = profile.hardware.tensor_parallel_size
        if tp <= 1:
            return Collectives()
        return Collectives(init_gib=NVLINK_INIT_GIB if gpu.nvlink else nccl_gib(tp))

    def in_flight_tokens(self, profile: Profile, gpu: Gpu) -> int:
        return _band(profile, gpu).chunked_prefill

    def state_slots(self, profile: Profile) -> StateSlots:
        # With speculation the Mamba pool keeps, per request slot, the recurrent state of every
        # draft token being verified and a conv window widened by the draft tokens
        # (`intermediate_ssm_state_cache`, shape [layers, size + 1, draft_tokens, H, V, K], and
        # the conv windows beside it, https://github.com/sgl-project/sglang/blob/v0.5.23/
        # python/sglang/srt/mem_cache/memory_pool.py#L598-L935).
        if profile.proposer.method == "none":
            return StateSlots()
        tokens = draft_tokens(profile)
        return StateSlots(extra_conv_positions=tokens, copies=1 + tokens)

    def logged_kv_tokens(self, profile: Profile, pool: KvPool) -> int:
        del profile
        return pool.capacity_tokens


def draft_tokens(profile: Profile) -> int:
    """The most draft tokens a step verifies, which sizes SGLang's speculative buffers: with
    adaptive speculation the longest candidate's steps + 1 (SGLang sizes for every state it may
    switch to, ADAPTIVE_DEFAULTS_SOURCE), else sglang.num_draft_tokens or steps + 1."""
    adaptive = adaptive_launch(profile)
    if adaptive is not None:
        return max(adaptive.candidate_steps) + 1
    tuned = profile.sglang.num_draft_tokens if profile.sglang else None
    return tuned or profile.proposer.num_speculative_tokens + 1


def default_graph_max_bs(profile: Profile, gpu: Gpu) -> int:
    """The largest decode batch SGLang captures by default for this release, GPU and TP size."""
    band = _band(profile, gpu)
    tp4 = profile.hardware.tensor_parallel_size >= 4
    max_bs = band.graph_max_bs_tp4 if tp4 else band.graph_max_bs
    if _defaults(profile).graph_bs_capped_by_running_requests:
        return min(max_bs, profile.serving.max_concurrency)
    return max_bs


def _band(profile: Profile, gpu: Gpu) -> _Band:
    defaults = _defaults(profile)
    return next((b for b in defaults.bands if gpu.memory_gib < b.below_gib), defaults.largest)


def _defaults(profile: Profile) -> _Defaults:
    version = parse_version(profile.engine.version)
    return next(d for first, d in DEFAULTS_BY_RELEASE if version >= first)
