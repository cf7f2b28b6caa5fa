"""vLLM's memory model: `--gpu-memory-utilization` is a share of total GPU memory covering
weights, activations, KV and (from v0.21) CUDA graphs; what its profile run and sampler warm-up
peak at, per release.

Releases modelled: the V0 engine (< 0.8) shows no sampler peak and profiles a whole prompt; V1
warms the sampler up over `max_num_seqs` requests by sorting until 0.17 brings a Triton top-k/top-p
kernel; CUDA graphs move inside `gpu_memory_utilization` from 0.21. At TP > 1 collective buffers
add about 2 GiB per GPU on NVLink boards: the communicators created before the weights load
(inside the knob until 0.11, outside it since; the expert-parallel group has its own from 0.11, for
every model until 0.14 and for MoE models since) and the channels NCCL connects during the profile
run (always inside).

How vLLM sizes the KV cache (v0.32.0, `Worker.determine_available_memory`,
https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/v1/worker/gpu_worker.py#L634-L744, and
`memory_profiling`, .../vllm/utils/mem_utils.py#L230-L321): requested = total x
gpu_memory_utilization; KV = requested - (memory consumed since the init snapshot + the torch
peak above what stays allocated) [- CUDA-graph estimate since 0.21]. What was in use before the
init snapshot (the CUDA context and, from 0.11, the parallel groups) is not charged to the knob.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, ClassVar, Final

from orchestrator.engines.base import Collectives
from orchestrator.engines.capabilities import parse_version
from orchestrator.memory.formulas import KV_BLOCK_TOKENS
from orchestrator.memory.knobs import round_down_fraction
from orchestrator.memory.kv import StateSlots
from orchestrator.memory.overheads import NON_TORCH_GIB
from orchestrator.memory.weights import WeightSharding

if TYPE_CHECKING:
    from orchestrator.checkpoint.info import CheckpointInfo
    from orchestrator.memory.estimate import MemoryEstimate, Overheads
    from orchestrator.memory.gpus import Gpu
    from orchestrator.memory.kv import KvPool
    from orchestrator.profile.schema import Profile

#: vLLM V1 warms the sampler up over `max_num_seqs` dummy requests with top-k/top-p by sorting,
#: per (request x vocabulary) entry: bf16 logits 2 + fp32 logits 4 + temperature copy 4 + sorted
#: values 4 + int64 sort indices 8 + softmax 4 + cumsum 4 + scattered logits 4 + probs 4 +
#: exponential noise 4 = 42 B; we use 40. Evidence: "CUDA out of memory occurred when warming up
#: sampler with 1024 dummy requests" (https://github.com/vllm-project/vllm/issues/15617, v0.8.2);
#: Qwen3-14B on an H100 at v0.15.0 and v0.16.0 peaks 5.64 GiB with 1024 x 151,936 entries, i.e.
#: 38.9 B (https://github.com/jgchn/llm-d-planner/blob/3c876c8a84d11e11c7092d5dc76ffeb47a3115ba/accuracy/results/version-sweep/runs/qwen3-14b-vllm-v0-15-0--h100-80gb--tp1pp1dp1--8192.json).
#: Not modelled: up to v0.11.0 an installed FlashInfer (>= 0.2.3) takes top-k/top-p over unless
#: VLLM_USE_FLASHINFER_SAMPLER=0 (https://github.com/vllm-project/vllm/blob/v0.9.2/vllm/v1/sample/ops/topk_topp_sampler.py#L32-L51;
#: opt-in from v0.11.1, https://github.com/vllm-project/vllm/blob/v0.11.1/vllm/v1/sample/ops/topk_topp_sampler.py#L34-L35). Neither the
#: vllm nor the lmcache wheel of those releases depends on FlashInfer, so pip installs sort; no
#: public log of the FlashInfer warm-up peak was found.
SORT_SAMPLER_BYTES_PER_LOGIT: Final = 40
#: From v0.17.0 batches of 8 or more take top-k/top-p through a Triton kernel instead of a sort
#: (`apply_top_k_top_p`, https://github.com/vllm-project/vllm/blob/v0.17.0/vllm/v1/sample/ops/topk_topp_sampler.py#L245-L255).
#: Measured on H100 with 1024 dummy requests: Qwen3-14B 2.23 GiB at v0.17.0 and v0.18.0 (15.4 B,
#: same source, ...-v0-17-0-...json), Llama-3.1-8B 1.89 GiB and Qwen2.5-7B 2.21 GiB at v0.19.0
#: (15.4 and 15.2 B, "torch peak memory increase" in .../accuracy/results/v0.19.0/logs/ at
#: https://github.com/jgchn/llm-d-planner/tree/a95e9f62e5de8cb5d2beb5f5279e7271a231416d).
LEAN_SAMPLER_BYTES_PER_LOGIT: Final = 15.3
LEAN_SAMPLER_FROM: Final = (0, 17, 0)
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

# --- memory outside torch and collective buffers ---
#: V1 non-torch increase at TP 1 ("non-torch forward increase memory", debug log): 0.24-0.27 GiB
#: in 39 of 42 v0.19.0 runs on H100 (0.46 in the 3 Granite runs) (https://github.com/jgchn/llm-d-planner/tree/a95e9f62e5de8cb5d2beb5f5279e7271a231416d/accuracy/results/v0.19.0/logs,
#: e.g. qwen-qwen2-5-7b-instruct--h100-80gb--tp1pp1dp1--8192.log). The V0 engine keeps
#: NON_TORCH_GIB (0.35 GiB on an RTX 3090, https://github.com/vllm-project/vllm/issues/10517).
V1_NON_TORCH_GIB: Final = 0.25
#: The worker takes its init memory snapshot after `init_worker_distributed_environment` from
#: v0.11.0 (https://github.com/vllm-project/vllm/pull/25359; compare `Worker.init_device` at
#: https://github.com/vllm-project/vllm/blob/v0.10.2/vllm/v1/worker/gpu_worker.py#L155-L196 and
#: https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/v1/worker/gpu_worker.py#L156-L186): before it the communicators' memory is a
#: non-torch increase charged to gpu_memory_utilization; from it, it is outside the knob.
SNAPSHOT_AFTER_PARALLEL_INIT_FROM: Final = (0, 11, 0)
#: On NVLink boards the parallel groups (pynccl communicator, custom all-reduce IPC buffers) hold
#: memory before the weights load: the init snapshot's non_torch_memory is 1.51-1.53 GiB at TP 2
#: and 4 against 0.51 GiB (the CUDA context) at TP 1, i.e. 1.0 GiB for the tensor-parallel group
#: (v0.19.0 on H100, "worker init memory snapshot" in the llm-d-planner logs above: fit on the
#: Llama-3.1-8B and Qwen2.5-7B TP 1/2/4 runs).
NVLINK_INIT_GIB: Final = 1.0
#: MoE models show 1.99-2.05 GiB there (Mixtral-8x7B and Kimi-VL-A3B at TP 2, same logs), 0.5 GiB
#: more: v0.19.0 builds the expert-parallel group only for MoE models ("Don't create EP group for
#: dense models", https://github.com/vllm-project/vllm/blob/v0.19.0/vllm/distributed/parallel_state.py#L1661-L1662)
#: and gives every group of more than one rank its own pynccl communicator
#: (https://github.com/vllm-project/vllm/blob/v0.19.0/vllm/distributed/device_communicators/cuda_communicator.py#L73-L78).
NVLINK_EP_GROUP_GIB: Final = 0.5
#: Which releases pay for that communicator. Before v0.11.0 every model has an EP group but
#: `CudaCommunicator` gives it no pynccl ("ep does not use pynccl",
#: https://github.com/vllm-project/vllm/blob/v0.9.2/vllm/distributed/device_communicators/cuda_communicator.py#L26-L35,
#: unchanged through https://github.com/vllm-project/vllm/blob/v0.10.2/vllm/distributed/device_communicators/cuda_communicator.py#L34-L35)
#: and no custom all-reduce (TP only), so it holds no GPU memory. v0.11.0 gives every group a pynccl
#: communicator (https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/distributed/device_communicators/cuda_communicator.py#L55-L60)
#: while still building the EP group for dense models too
#: (https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/distributed/parallel_state.py#L1198-L1206); v0.14.0 builds it for MoE models
#: only (https://github.com/vllm-project/vllm/blob/v0.14.0/vllm/distributed/parallel_state.py#L1405-L1408).
EP_GROUP_COMMUNICATOR_FROM: Final = (0, 11, 0)
EP_GROUP_MOE_ONLY_FROM: Final = (0, 14, 0)
#: ...and the profile run's first collectives add non-torch memory on top of the TP-1 figure
#: (NCCL connects its channels lazily): "non-torch forward increase memory" 2.06-2.07 GiB at TP 2
#: and 2.13 GiB at TP 4 against 0.25 GiB at TP 1 (same fit runs). TP 8 is taken as TP 4 (no log).
NVLINK_WARMUP_GIB_TP2: Final = 1.82
NVLINK_WARMUP_GIB_TP4_AND_UP: Final = 1.88
#: Over PCIe (no peer-to-peer NVLink, no custom all-reduce) NCCL's buffers are mostly host memory:
#: 4 x A100-PCIe-40GB at TP 4 report non_torch_memory 0.34-0.43 GiB
#: (https://github.com/vllm-project/vllm/issues/16570, v0.8.3 V0, counted from before NCCL init)
#: and 2 x RTX 4090 at TP 2 0.25 GiB (https://github.com/vllm-project/vllm/issues/13061), i.e. at
#: most ~0.1 GiB above one GPU.
PCIE_COLLECTIVE_GIB: Final = 0.1

#: From v0.21.0 vLLM logs the KV cache as `int(max_concurrency x max_model_len)`, the real
#: capacity in max_model_len sequences (`get_kv_cache_capacity`,
#: https://github.com/vllm-project/vllm/blob/v0.21.0/vllm/v1/core/kv_cache_utils.py#L1696-L1708);
#: before it, as blocks per KV group (see `VllmMemory.logged_kv_tokens`).
CAPACITY_LOGGED_FROM: Final = (0, 21, 0)
#: From v0.27.0 sliding-window and chunked layers reserve `max_in_flight_tokens` =
#: max_concurrent_batches x max_num_batched_tokens (2 batches under async scheduling)
#: (https://github.com/vllm-project/vllm/blob/v0.27.0/vllm/config/vllm.py#L540-L560); before it
#: one batch (https://github.com/vllm-project/vllm/blob/v0.19.0/vllm/v1/kv_cache_interface.py#L255-L270).
IN_FLIGHT_BATCHES_FROM: Final = (0, 27, 0)


class VllmMemory:
    """vLLM: `gpu_memory_utilization`, a share of the total memory CUDA reports."""

    knob: ClassVar[str] = "gpu_memory_utilization"

    def knob_without_estimate(self, profile: Profile) -> float:
        return round_down_fraction(profile.serving.gpu_memory_fraction)

    def knob_for(self, estimate: MemoryEstimate) -> float:
        # The profile's share, less what vLLM holds outside its knob (graphs before 0.21, the
        # parallel groups' buffers from 0.11).
        outside = _outside_knob(estimate.overheads)
        return round_down_fraction(estimate.gpu_memory_fraction - outside / estimate.gpu_usable_gib)

    def kv_gib_at(self, estimate: MemoryEstimate, knob: float) -> float:
        # usable x knob, less everything vLLM budgets inside it.
        o = estimate.overheads
        weights = estimate.target_weights_gib + estimate.draft_weights_gib
        return estimate.gpu_usable_gib * knob - weights - (o.total_gib - _outside_knob(o))

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

    def non_torch_gib(self, profile: Profile) -> float:
        v0 = parse_version(profile.engine.version) < V1_DEFAULT_FROM
        return NON_TORCH_GIB if v0 else V1_NON_TORCH_GIB

    def collectives(self, profile: Profile, target: CheckpointInfo, gpu: Gpu) -> Collectives:
        hardware = profile.hardware
        in_budget = parse_version(profile.engine.version) < SNAPSHOT_AFTER_PARALLEL_INIT_FROM
        if hardware.tensor_parallel_size * hardware.pipeline_parallel_size <= 1:
            return Collectives(init_in_budget=in_budget)
        if not gpu.nvlink:
            return Collectives(warmup_gib=PCIE_COLLECTIVE_GIB, init_in_budget=in_budget)
        init = NVLINK_INIT_GIB
        if hardware.tensor_parallel_size > 1 and _ep_group_has_communicator(
            profile.engine.version, moe=bool(target.num_experts)
        ):
            init += NVLINK_EP_GROUP_GIB
        return Collectives(
            init_gib=init,
            warmup_gib=_nvlink_warmup_gib(hardware.tensor_parallel_size),
            init_in_budget=in_budget,
        )

    def in_flight_tokens(self, profile: Profile, gpu: Gpu) -> int:
        batched = self.profiled_tokens(profile, gpu)
        if parse_version(profile.engine.version) < IN_FLIGHT_BATCHES_FROM:
            return batched
        # max_in_flight_tokens = max_concurrent_batches x max_num_batched_tokens: 2 batches with
        # async scheduling (on by default unless PP > 1 or n-gram speculation), else PP.
        pp = profile.hardware.pipeline_parallel_size
        asynchronous = pp == 1 and profile.proposer.method != "ngram"
        return batched * (2 if asynchronous else pp)

    def state_slots(self, profile: Profile) -> StateSlots:
        # MambaSpec: num_speculative_blocks = num_speculative_tokens, one state block per
        # speculative position besides the committed one; the conv state keeps
        # conv_kernel - 1 + num_spec positions (https://github.com/vllm-project/vllm/blob/
        # v0.32.0/vllm/model_executor/layers/mamba/abstract.py#L65-L84 and
        # .../v1/kv_cache_interface.py#L1076-L1082).
        if profile.proposer.method == "none":
            return StateSlots()
        k = profile.proposer.num_speculative_tokens
        return StateSlots(extra_conv_positions=k, copies=1 + k)

    def logged_kv_tokens(self, profile: Profile, pool: KvPool) -> int:
        kinds = [n for n in (pool.full_layers, pool.sliding_layers, pool.chunked_layers) if n]
        before = parse_version(profile.engine.version) < CAPACITY_LOGGED_FROM
        if not before or len(kinds) < 2 or pool.linear_layers or not pool.per_layer_bytes:
            return pool.capacity_tokens
        # Before 0.21 vLLM logs num_blocks // groups x block_size, where the layers of each
        # attention kind are split into groups of `group_size` (the smallest kind's count, or
        # the largest's when that is under 1.5x it) that share one pool of
        # available // (page x group_size) blocks: a sliding-window model is logged as if every
        # layer slot held full context (`_get_kv_cache_groups_uniform_page_size`,
        # `get_kv_cache_config_from_groups`, `_report_kv_cache_config`,
        # https://github.com/vllm-project/vllm/blob/v0.19.0/vllm/v1/core/kv_cache_utils.py#L959-L1150
        # and #L1287-L1319).
        group_size = min(kinds)
        if max(kinds) < group_size * 1.5:
            group_size = max(kinds)
        groups = sum(math.ceil(n / group_size) for n in kinds)
        page = pool.per_layer_bytes * KV_BLOCK_TOKENS
        blocks = int(pool.kv_bytes // page // group_size)
        return blocks // groups * KV_BLOCK_TOKENS


def _nvlink_warmup_gib(tensor_parallel: int) -> float:
    if tensor_parallel <= 1:  # pipeline stages only: no all-reduce in the forward pass
        return 0.0
    return NVLINK_WARMUP_GIB_TP2 if tensor_parallel == 2 else NVLINK_WARMUP_GIB_TP4_AND_UP


def _ep_group_has_communicator(version: str, *, moe: bool) -> bool:
    """Whether the expert-parallel group (DP x TP ranks) holds its own NCCL communicator."""
    release = parse_version(version)
    if release < EP_GROUP_COMMUNICATOR_FROM:
        return False
    return moe or release < EP_GROUP_MOE_ONLY_FROM


def _outside_knob(o: Overheads) -> float:
    """What vLLM holds outside gpu_memory_utilization for this estimate."""
    graphs = 0.0 if o.graphs_in_budget else o.cuda_graph_gib
    groups = 0.0 if o.nccl_in_budget else o.nccl_gib
    return graphs + groups
