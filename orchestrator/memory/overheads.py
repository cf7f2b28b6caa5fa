"""Runtime overheads per GPU: activation peak, CUDA graphs, non-torch memory, NCCL.

The engine-neutral formulas live here (the forward-pass and sampler peaks, NCCL buffers); what
differs by engine and release (how many tokens the profile run takes, what the sampler warm-up
costs per logit, CUDA graphs, the non-torch and collective buffers by TP size and interconnect,
and which of them the knob covers) comes from the engine's memory model (`Engine.memory`,
orchestrator/engines/<engine>_memory.py). These are estimates with named
sources, not measurements; `benchmarks/memory_accuracy.py` compares the resulting KV sizes with
what engines logged.
"""

from __future__ import annotations

from typing import Final

from orchestrator.checkpoint.info import CheckpointInfo
from orchestrator.engines import ENGINES
from orchestrator.memory.estimate import Overheads
from orchestrator.memory.gpus import GIB, Gpu
from orchestrator.profile.schema import Profile

# --- activation peak (all engines run a profile / warm-up forward pass at the batch-token cap) ---
# The profile run has two peaks that never coexist: the forward pass (MLP intermediates at the
# batch-token cap) and the sampler warm-up (logits of `max_num_seqs` dummy requests). The engine
# records the larger one, so the activation term is max(forward, sampler), not their sum.
#: Peak forward-pass bytes per profiled token per intermediate (MLP) element on one GPU. Fitted to
#: vLLM's "PyTorch activation peak" (peak_torch_memory - weights) for Llama-3.1-8B (I=14336) on
#: an RTX 3090 (https://github.com/vllm-project/vllm/issues/10517): 2.07 GiB at 20,000 and 2.99 GiB at 29,000 profiled
#: tokens give 7.75 and 7.72 B with no intercept (the sampler peak, ~1.2 GiB, is the smaller one).
ACTIVATION_BYTES_PER_TOKEN_PER_INTERMEDIATE: Final = 7.75
#: MoE layers add the fused-MoE output cache, tokens x top-k x hidden x 2 B (vLLM
#: `intermediate_cache3`, shape (M, topk, K),
#: https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/model_executor/layers/fused_moe/fused_moe.py#L1743);
#: aiconfigurator adds a "MoE block-scale dispatch workspace" term for the same reason
#: (https://github.com/ai-dynamo/aiconfigurator/blob/095f58a51c4ca8e61b66ec108d86f223f8d559ce/aic-core/src/aiconfigurator_core/sdk/backends/base_backend.py#L1705-L1708).
MOE_WORKSPACE_BYTES_PER_ELEMENT: Final = 2

# --- memory outside torch (engine-neutral defaults; engines with their own logs override them) ---
#: cuBLAS/allocator memory outside torch one GPU holds without collectives: 0.35 GiB (RTX 3090,
#: vLLM V0, https://github.com/vllm-project/vllm/issues/10517), 0.33 GiB (RTX 5090,
#: https://github.com/vllm-project/vllm/issues/14452), 0.20-0.25 GiB (https://github.com/vllm-project/vllm/pull/14447,
#: https://github.com/vllm-project/vllm/issues/13061). The engines' `non_torch_gib` use it unless they have their own logs.
NON_TORCH_GIB: Final = 0.35
#: NCCL buffers per GPU when TP > 1 where no engine log says otherwise: aiconfigurator's nccl_mem,
#: 342 MiB (TP2) / 392 MiB (TP4, TP8), "some nonofficial correction based on observations" on
#: PCIe systems (https://github.com/ai-dynamo/aiconfigurator/blob/ee962fc3fcb7c1ef6af9a1e1ae9444a3d1c161e9/src/aiconfigurator/systems/l40s.yaml#L26-L31).
NCCL_GIB_TP2: Final = 342 / 1024
NCCL_GIB_TP4_AND_UP: Final = 392 / 1024


def engine_overheads(profile: Profile, target: CheckpointInfo, gpu: Gpu) -> Overheads:
    """The overheads of `profile.engine` at its version for this target on this GPU."""
    model = ENGINES[profile.engine.name].memory
    tp = profile.hardware.tensor_parallel_size
    tokens = model.profiled_tokens(profile, gpu)
    forward = forward_bytes(target, tokens, tp) / GIB
    per_logit = model.sampler_bytes_per_logit(profile)
    sampler = sampler_bytes(target, profile.serving.max_concurrency, per_logit) / GIB
    collectives = model.collectives(profile, target, gpu)
    return Overheads(
        activation_gib=max(forward, sampler),
        cuda_graph_gib=model.cuda_graph_gib(profile, target, gpu),
        non_torch_gib=model.non_torch_gib(profile),
        nccl_gib=collectives.init_gib,
        graphs_in_budget=model.graphs_in_budget(profile),
        profiled_tokens=tokens,
        forward_gib=forward,
        sampler_gib=sampler,
        collective_warmup_gib=collectives.warmup_gib,
        nccl_in_budget=collectives.init_in_budget,
    )


def activation_bytes(
    info: CheckpointInfo,
    tokens: int,
    tp: int,
    max_seqs: int,
    bytes_per_logit: float,
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


def _active_intermediate(info: CheckpointInfo) -> int:
    if info.num_experts:
        per_expert = info.moe_intermediate_size or info.intermediate_size or 0
        active = per_expert * ((info.num_experts_per_tok or 1) + (info.num_shared_experts or 0))
        dense = (info.intermediate_size or 0) if info.first_k_dense_replace else 0
        return max(active, dense)
    return info.intermediate_size or 4 * (info.hidden_size or 0)


def nccl_gib(tensor_parallel: int) -> float:
    """NCCL buffer memory per GPU for a TP group of this size (aiconfigurator's default)."""
    if tensor_parallel <= 1:
        return 0.0
    return NCCL_GIB_TP2 if tensor_parallel == 2 else NCCL_GIB_TP4_AND_UP
