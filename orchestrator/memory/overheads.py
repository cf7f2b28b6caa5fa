"""Runtime overheads per engine and release: activation peak, CUDA graphs, non-torch, NCCL.

These are estimates with named sources, not measurements; `benchmarks/memory_accuracy.py`
compares the resulting KV sizes with what engines logged (15 public logs, vLLM 0.6-0.21, SGLang,
TensorRT-LLM). Release differences modelled: vLLM V0 (< 0.8) shows no sampler peak, V1 warms the
sampler up over `max_num_seqs` requests by sorting until a cheaper warm-up (seen from 0.21), and
CUDA graphs move inside `gpu_memory_utilization` from 0.21.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from orchestrator.checkpoint.info import CheckpointInfo
from orchestrator.engines.capabilities import parse_version
from orchestrator.memory.gpus import GIB, Gpu
from orchestrator.profile.schema import Profile

# --- activation peak (all engines run a profile / warm-up forward pass at the batch-token cap) ---
# The profile run has two peaks that never coexist: the forward pass (MLP intermediates at the
# batch-token cap) and the sampler warm-up (logits of `max_num_seqs` dummy requests). The engine
# records the larger one, so the activation term is max(forward, sampler), not their sum.
#: Peak forward-pass bytes per profiled token per intermediate (MLP) element on one GPU. Fitted to
#: vLLM's "PyTorch activation peak" (peak_torch_memory - weights) for Llama-3.1-8B (I=14336) on
#: an RTX 3090 (vllm-project/vllm#10517): 2.07 GiB at 20,000 and 2.99 GiB at 29,000 profiled
#: tokens give 7.75 and 7.72 B with no intercept (the sampler peak, ~1.2 GiB, is the smaller one).
ACTIVATION_BYTES_PER_TOKEN_PER_INTERMEDIATE: Final = 7.75
#: MoE layers add the fused-MoE output cache, tokens x top-k x hidden x 2 B (vLLM
#: fused_moe.py `intermediate_cache3`, shape (M, topk, K)); aiconfigurator adds a "MoE dispatch
#: workspace" term for the same reason (catalog.md §D4).
MOE_WORKSPACE_BYTES_PER_ELEMENT: Final = 2
#: vLLM V1 (default from 0.8.0) warms the sampler up over `max_num_seqs` dummy requests with
#: top-k/top-p by sorting, per (request x vocabulary) entry: bf16 logits 2 + fp32 logits 4 +
#: temperature copy 4 + sorted values 4 + int64 sort indices 8 + softmax 4 + cumsum 4 + scattered
#: logits 4 + probs 4 + exponential noise 4 = 42 B; we use 40. Evidence: "CUDA out of memory
#: occurred when warming up sampler with 1024 dummy requests" (vllm#15617, v0.8.2); Qwen3-235B-FP8
#: at TP4 on H100 (vllm#21348, ~v0.9.2) leaves 8.1 GiB of non-KV memory beyond the weights, which
#: only a ~5.8 GiB sampler peak (1024 x 151,936 x 40 B) comes close to explaining.
VLLM_SORT_SAMPLER_BYTES_PER_LOGIT: Final = 40
#: Later vLLM warms the sampler up far more cheaply: a v0.21 Qwen3-8B log on a 24 GB card
#: (LMCache/LMCache#3430) leaves at most ~0.5 GiB for activations with 256 x 151,936 entries,
#: i.e. <= 13.8 B/entry (fp32 logits + probs ~ 8-12 B). We take 12 B from v0.21.0, the first
#: release with a log showing it; the change lies somewhere in 0.9.3-0.21.0 and releases in that
#: window keep the sort-based cost (predicts less KV, the safe side).
VLLM_LEAN_SAMPLER_BYTES_PER_LOGIT: Final = 12
VLLM_LEAN_SAMPLER_FROM: Final = (0, 21, 0)
#: The V0 engine (< 0.8) has no separate sampler warm-up whose peak shows: the 35k-token
#: chunked-prefill run of vllm#10517 peaks 0.06-0.09 GiB above the weights with 256 x 128,256
#: entries, i.e. about the bf16 logits alone (2 B/entry).
VLLM_V0_SAMPLER_BYTES_PER_LOGIT: Final = 2
#: SGLang and TensorRT-LLM warm-up logits: fp32 logits and probabilities (no public log to fit).
LOGITS_BYTES_PER_ENTRY: Final = 8
#: vLLM V1 default max_num_batched_tokens for `vllm serve`: 8192 on GPUs with >= 70 GiB that are
#: not A100, else 2048 (vllm/engine/arg_utils.py `_set_default_args_v1`, v0.8-v0.10).
VLLM_V1_BATCHED_TOKENS_LARGE_GPU: Final = 8192
VLLM_V1_BATCHED_TOKENS_SMALL_GPU: Final = 2048
VLLM_LARGE_GPU_GIB: Final = 70.0
#: V1 engine (chunked prefill always on) is the default from v0.8.0; V0 profiled a whole
#: max_model_len prompt unless chunked prefill was enabled (vllm#8185, #10517 logs).
VLLM_V1_DEFAULT_FROM: Final = (0, 8, 0)
#: V0 turned chunked prefill on by default above 32k tokens of context, with a 2048-token
#: batch (vllm/engine/arg_utils.py V0; the 35k run in vllm#10517 profiles less than the 29k one).
VLLM_V0_CHUNKED_ABOVE_LEN: Final = 32768
VLLM_V0_CHUNKED_BATCHED_TOKENS: Final = 2048
#: SGLang chunked_prefill_size default by GPU memory band (sglang server_args; sglang_trtllm.md A5).
SGLANG_CHUNKED_PREFILL_BY_GIB: Final = ((20, 2048), (35, 2048), (60, 4096), (90, 8192), (160, 8192))
SGLANG_CHUNKED_PREFILL_LARGEST: Final = 16384
#: TensorRT-LLM LlmArgs.max_num_tokens default (sglang_trtllm.md B5).
TRTLLM_MAX_NUM_TOKENS: Final = 8192

# --- CUDA graphs ---
#: vLLM estimates CUDA-graph memory and subtracts it from the KV budget since v0.21.0
#: ("CUDA graph memory profiling is enabled (default since v0.21.0)", PR #30515); before, graphs
#: were captured outside `gpu_memory_utilization` (issue #17549).
VLLM_GRAPHS_IN_BUDGET_FROM: Final = (0, 21, 0)
#: Logged estimates for dense models: 0.17 GiB (TP4, club-3090#127), 0.36 GiB (TP2,
#: gpustack/runner#251), 0.52 GiB (Qwen3-8B TP1, LMCache#3430). MoE models capture far more
#: (4.7-16.9 GiB per GPU for large MoE at TP8, vllm PR #51590); 2 GiB is a middle value.
VLLM_CUDA_GRAPH_GIB_DENSE: Final = 0.5
VLLM_CUDA_GRAPH_GIB_MOE: Final = 2.0
#: SGLang reserves about 2 MB per captured decode batch size (sglang memory hook; A5), outside
#: mem_fraction_static; default cuda_graph_max_bs by GPU memory band (same source).
SGLANG_GRAPH_BYTES_PER_BATCH: Final = 2 * 1024**2
SGLANG_GRAPH_MAX_BS_BY_GIB: Final = ((20, 8), (35, 48), (60, 32), (90, 256), (160, 256))
SGLANG_GRAPH_MAX_BS_LARGEST: Final = 512
#: TensorRT-LLM: ~60 MB per captured graph (TensorRT-LLM PR #3362 review), default
#: cuda_graph_config.max_batch_size 128 → 8 power-of-two sizes ≈ 0.5 GiB.
TRTLLM_CUDA_GRAPH_GIB: Final = 0.5

# --- memory outside torch ---
#: cuBLAS/NCCL/allocator memory outside torch that vLLM counts: 0.35 GiB (RTX 3090, vllm#10517),
#: 0.33 GiB (RTX 5090, vllm#14452), 0.20-0.25 GiB (vllm PR #14447, issue #13061).
NON_TORCH_GIB: Final = 0.35
#: NCCL buffers per GPU when TP > 1: aiconfigurator nccl_mem 342 MiB (TP2) / 392 MiB (TP4, TP8).
NCCL_GIB_TP2: Final = 342 / 1024
NCCL_GIB_TP4_AND_UP: Final = 392 / 1024


@dataclass(frozen=True)
class Overheads:
    """Memory one GPU needs besides weights and KV cache, and which of it the engine budgets."""

    activation_gib: float
    """The profile run's peak: the larger of `forward_gib` and `sampler_gib`."""
    cuda_graph_gib: float
    non_torch_gib: float
    nccl_gib: float
    graphs_in_budget: bool
    """False when the engine captures CUDA graphs outside its own memory knob (vLLM < 0.21)."""
    profiled_tokens: int
    forward_gib: float = 0.0
    """Peak of the forward pass at `profiled_tokens` (MLP intermediates, MoE workspace)."""
    sampler_gib: float = 0.0
    """Peak of the sampler warm-up over `max_concurrency` dummy requests."""

    @property
    def total_gib(self) -> float:
        return self.activation_gib + self.cuda_graph_gib + self.non_torch_gib + self.nccl_gib

    @property
    def before_load_gib(self) -> float:
        """Memory in use before the engine loads weights (CUDA context, cuBLAS, NCCL)."""
        return self.non_torch_gib + self.nccl_gib


def engine_overheads(profile: Profile, target: CheckpointInfo, gpu: Gpu) -> Overheads:
    """The overheads of `profile.engine` at its version for this target on this GPU."""
    tp = profile.hardware.tensor_parallel_size
    tokens = profiled_tokens(profile, gpu)
    forward = forward_bytes(target, tokens, tp) / GIB
    sampler = sampler_bytes(target, profile.serving.max_concurrency, _sampler_cost(profile)) / GIB
    return Overheads(
        activation_gib=max(forward, sampler),
        cuda_graph_gib=cuda_graph_gib(profile, target, gpu),
        non_torch_gib=NON_TORCH_GIB,
        nccl_gib=nccl_gib(tp),
        graphs_in_budget=_graphs_in_budget(profile),
        profiled_tokens=tokens,
        forward_gib=forward,
        sampler_gib=sampler,
    )


def activation_bytes(
    info: CheckpointInfo,
    tokens: int,
    tp: int,
    max_seqs: int,
    bytes_per_logit: float = LOGITS_BYTES_PER_ENTRY,
) -> float:
    """Peak activation of the profile run: the larger of the forward pass and the sampler."""
    return max(forward_bytes(info, tokens, tp), sampler_bytes(info, max_seqs, bytes_per_logit))


def forward_bytes(info: CheckpointInfo, tokens: int, tp: int) -> float:
    """Forward-pass peak on one GPU: MLP intermediates per token, plus the fused-MoE output cache
    (tokens x top-k x hidden) for MoE models."""
    mlp = tokens * _active_intermediate(info) / tp * ACTIVATION_BYTES_PER_TOKEN_PER_INTERMEDIATE
    if not info.num_experts:
        return mlp
    topk = info.num_experts_per_tok or 1
    return mlp + tokens * topk * (info.hidden_size or 0) * MOE_WORKSPACE_BYTES_PER_ELEMENT


def sampler_bytes(info: CheckpointInfo, max_seqs: int, bytes_per_logit: float) -> float:
    """Sampler warm-up peak: one logits row per dummy request over the whole vocabulary (logits
    are gathered to the sampling rank, so they are not split by TP)."""
    return max_seqs * (info.vocab_size or 0) * bytes_per_logit


def _sampler_cost(profile: Profile) -> float:
    if profile.engine.name != "vllm":
        return LOGITS_BYTES_PER_ENTRY
    version = parse_version(profile.engine.version)
    if version < VLLM_V1_DEFAULT_FROM:
        return VLLM_V0_SAMPLER_BYTES_PER_LOGIT
    if version < VLLM_LEAN_SAMPLER_FROM:
        return VLLM_SORT_SAMPLER_BYTES_PER_LOGIT
    return VLLM_LEAN_SAMPLER_BYTES_PER_LOGIT


def profiled_tokens(profile: Profile, gpu: Gpu) -> int:
    """Tokens in the engine's profiling / warm-up forward pass."""
    engine = profile.engine.name
    if engine == "sglang":
        return _by_memory_band(
            gpu.memory_gib, SGLANG_CHUNKED_PREFILL_BY_GIB, SGLANG_CHUNKED_PREFILL_LARGEST
        )
    if engine == "trtllm":
        tuned = profile.trtllm.max_num_tokens if profile.trtllm else None
        return tuned or TRTLLM_MAX_NUM_TOKENS
    tuned = profile.vllm.max_num_batched_tokens if profile.vllm else None
    if tuned:
        return tuned
    if parse_version(profile.engine.version) < VLLM_V1_DEFAULT_FROM:
        if profile.serving.max_model_len > VLLM_V0_CHUNKED_ABOVE_LEN:
            return VLLM_V0_CHUNKED_BATCHED_TOKENS
        return max(profile.serving.max_model_len, profile.serving.max_concurrency)
    large = gpu.memory_gib >= VLLM_LARGE_GPU_GIB and not gpu.name.startswith("A100")
    return VLLM_V1_BATCHED_TOKENS_LARGE_GPU if large else VLLM_V1_BATCHED_TOKENS_SMALL_GPU


def cuda_graph_gib(profile: Profile, target: CheckpointInfo, gpu: Gpu) -> float:
    """CUDA-graph memory per GPU (0 when the profile disables graphs)."""
    engine = profile.engine.name
    if engine == "vllm":
        if profile.vllm is not None and profile.vllm.enforce_eager:
            return 0.0
        return VLLM_CUDA_GRAPH_GIB_MOE if target.num_experts else VLLM_CUDA_GRAPH_GIB_DENSE
    if engine == "sglang":
        tuned = profile.sglang.cuda_graph_max_bs if profile.sglang else None
        max_bs = tuned or _by_memory_band(
            gpu.memory_gib, SGLANG_GRAPH_MAX_BS_BY_GIB, SGLANG_GRAPH_MAX_BS_LARGEST
        )
        return max_bs * SGLANG_GRAPH_BYTES_PER_BATCH / GIB
    return TRTLLM_CUDA_GRAPH_GIB


def _graphs_in_budget(profile: Profile) -> bool:
    if profile.engine.name != "vllm":
        return True
    return parse_version(profile.engine.version) >= VLLM_GRAPHS_IN_BUDGET_FROM


def _active_intermediate(info: CheckpointInfo) -> int:
    if info.num_experts:
        per_expert = info.moe_intermediate_size or info.intermediate_size or 0
        active = per_expert * ((info.num_experts_per_tok or 1) + (info.num_shared_experts or 0))
        dense = (info.intermediate_size or 0) if info.first_k_dense_replace else 0
        return max(active, dense)
    return info.intermediate_size or 4 * (info.hidden_size or 0)


def nccl_gib(tensor_parallel: int) -> float:
    """NCCL buffer memory per GPU for a TP group of this size."""
    if tensor_parallel <= 1:
        return 0.0
    return NCCL_GIB_TP2 if tensor_parallel == 2 else NCCL_GIB_TP4_AND_UP


def _by_memory_band(gib: float, bands: tuple[tuple[int, int], ...], largest: int) -> int:
    for upper_gib, value in bands:
        if gib < upper_gib:
            return value
    return largest
