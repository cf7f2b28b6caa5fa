"""Analytic speedup estimate for `plan --speedup`: an ESTIMATE, never a measurement.

Model (Leviathan, Kalman & Matias 2023, "Fast Inference from Transformers via Speculative
Decoding", ICML, arXiv:2211.17192):
- with per-token acceptance probability α and draft length k, one target step commits on
  average E(α, k) = (1 - α^(k+1)) / (1 - α) tokens (k + 1 when α = 1) — their Eq. 1;
- each step costs k draft forwards plus one target verification of k + 1 tokens; at batch 1 in
  the memory-bound regime verification costs one ordinary step, giving their speedup
  E / (c·k + 1) with c = draft step time / target step time (Theorem 3.8).
Load is added with a roofline for one decode step of B sequences, each verifying n tokens:
  t(B, n) = max((W + B·L·kv) / BW, 2·P·B·n / FLOPS)
(weights W bytes, active parameters P, context L tokens per sequence, kv bytes per token, GPU
bandwidth BW and dense FLOPS from the GPU catalog). While memory-bound, verifying k + 1 tokens is
almost free; once B·(k + 1) passes the GPU's critical batch the extra tokens cost compute, which
is why speculation stops paying under load (vLLM docs, dynamic speculative decoding: "when BS*K
goes beyond a critical BS then SD negatively impacts the decode speed"). Long contexts delay that
point: every sequence's KV cache is read each step (MagicDec, Chen et al. 2024). The draft step is
taken as c × the target's step at the same batch. Real engines add scheduling and sampling overheads
this ignores, so use `specdeploy bench` for the decision.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Protocol

LABEL: Final = (
    "analytic estimate (Leviathan et al. 2023 expected tokens per step and a memory-bound decode "
    "roofline); not a measurement: confirm with `specdeploy bench`"
)
DRAFT_LENGTHS: Final = (1, 2, 3, 4, 5, 6, 7, 8)
LOADS: Final = (1, 2, 4, 8, 16, 32, 64, 128)
TB: Final = 1e12
GIB: Final = 1024**3
DEFAULT_CONTEXT_TOKENS: Final = 1024
"""Assumed mean context per decoding sequence when the caller does not know its workload."""
BF16_BYTES: Final = 2.0


class MemoryFacts(Protocol):
    """What the estimate needs from a memory budget (orchestrator.memory.budget.MemoryEstimate
    fits): per-GPU weights, the target's KV bytes per token and the concurrency figures."""

    @property
    def target_weights_gib(self) -> float: ...

    @property
    def draft_weights_gib(self) -> float: ...

    @property
    def target_kv_bytes_per_token(self) -> int: ...

    @property
    def max_concurrency(self) -> int: ...

    @property
    def requested_concurrency(self) -> int: ...


class GpuSpec(Protocol):
    """What the roofline needs from a GPU catalog entry (orchestrator.memory.gpus.Gpu fits)."""

    @property
    def bandwidth_tbps(self) -> float: ...

    @property
    def bf16_tflops(self) -> float | None: ...


@dataclass(frozen=True)
class Roofline:
    """One decode step's cost on one GPU (or one tensor-parallel group, with summed figures)."""

    bandwidth_bytes_per_s: float
    flops_per_s: float | None
    """Dense peak; None = treat the step as memory-bound at every batch."""
    weight_bytes: float
    active_params: float
    kv_bytes_per_token: float
    context_tokens: float
    """Mean tokens in context per sequence while decoding (prompt + half the output)."""

    def step_s(self, batch: int, tokens_per_sequence: int) -> float:
        """Seconds for one target forward over `batch` sequences of `tokens_per_sequence`."""
        kv = batch * self.context_tokens * self.kv_bytes_per_token
        memory = (self.weight_bytes + kv) / self.bandwidth_bytes_per_s
        if self.flops_per_s is None:
            return memory
        compute = 2.0 * self.active_params * batch * tokens_per_sequence / self.flops_per_s
        return max(memory, compute)


def roofline_for(
    gpu: GpuSpec,
    *,
    weight_bytes: float,
    active_params: float,
    kv_bytes_per_token: float,
    context_tokens: float,
    gpus: int = 1,
) -> Roofline:
    """A roofline from a GPU catalog entry; `gpus` tensor-parallel GPUs add bandwidth and FLOPS."""
    flops = None if gpu.bf16_tflops is None else gpu.bf16_tflops * TB * gpus
    return Roofline(
        gpu.bandwidth_tbps * TB * gpus,
        flops,
        weight_bytes,
        active_params,
        kv_bytes_per_token,
        context_tokens,
    )


def expected_tokens_per_step(alpha: float, k: int) -> float:
    """Leviathan et al. Eq. 1: mean tokens committed per target step (bonus token included)."""
    if alpha >= 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def alpha_from_acceptance_length(mean_length: float, k: int) -> float:
    """Invert Eq. 1: the α that gives a measured mean acceptance length (e.g. from `bench`)."""
    target = min(max(mean_length, 1.0), k + 1.0)
    low, high = 0.0, 1.0
    for _ in range(60):  # bisection; E is increasing in α
        mid = (low + high) / 2.0
        low, high = (mid, high) if expected_tokens_per_step(mid, k) < target else (low, mid)
    return (low + high) / 2.0


def alpha_from_acceptance_rate(rate: float, k: int) -> float:
    """α from an engine's draft acceptance rate (accepted / drafted tokens, as vLLM reports it):
    with k drafted per step, mean acceptance length = 1 + rate·k (vllm.md §5)."""
    return alpha_from_acceptance_length(1.0 + rate * k, k)


def speedup(
    alpha: float, k: int, cost_ratio: float, batch: int, roofline: Roofline | None
) -> float:
    """Estimated decode speedup (tokens per unit time, speculative over plain) at one load."""
    tokens = expected_tokens_per_step(alpha, k)
    if roofline is None:
        return tokens / (cost_ratio * k + 1.0)  # Leviathan et al. Theorem 3.8
    plain = roofline.step_s(batch, 1)
    speculative = k * cost_ratio * plain + roofline.step_s(batch, k + 1)
    return tokens * plain / speculative


@dataclass(frozen=True)
class LoadEstimate:
    """Speedup per draft length at one load, and the best draft length there."""

    concurrency: int
    speedups: tuple[tuple[int, float], ...]
    best_k: int
    best_speedup: float


@dataclass(frozen=True)
class SpeedupEstimate:
    """The `speedup_estimate` block of `plan --format json`."""

    label: str
    alpha: float
    cost_ratio: float
    loads: tuple[LoadEstimate, ...]
    recommended_num_speculative_tokens: int
    """Best draft length at the lowest load where speculation pays most; see `reason`."""
    stops_paying_at: int | None
    """Lowest estimated load where even the best draft length gives speedup <= 1."""
    reason: str
    assumptions: tuple[tuple[str, float | str], ...] = ()

    def as_json(self) -> dict[str, object]:
        return {
            "label": self.label,
            "alpha": self.alpha,
            "cost_ratio": self.cost_ratio,
            "recommended_num_speculative_tokens": self.recommended_num_speculative_tokens,
            "stops_paying_at": self.stops_paying_at,
            "reason": self.reason,
            "assumptions": dict(self.assumptions),
            "loads": [
                {
                    "concurrency": load.concurrency,
                    "best_k": load.best_k,
                    "best_speedup": round(load.best_speedup, 4),
                    "speedup_by_k": {str(k): round(s, 4) for k, s in load.speedups},
                }
                for load in self.loads
            ],
        }


def estimate(
    alpha: float,
    cost_ratio: float,
    roofline: Roofline | None,
    *,
    loads: Sequence[int] = LOADS,
    draft_lengths: Sequence[int] = DRAFT_LENGTHS,
    serving_concurrency: int | None = None,
) -> SpeedupEstimate:
    """Speedup vs draft length and load, recommending num_speculative_tokens for the load the
    deployment serves (`serving_concurrency`, else the lowest load)."""
    if not 0.0 <= alpha <= 1.0 or cost_ratio < 0.0:
        raise ValueError(f"alpha={alpha} must be in [0, 1] and cost_ratio={cost_ratio} >= 0")
    if roofline is None:
        loads = loads[:1]  # without a roofline the estimate does not depend on load
    rows = tuple(_load(alpha, cost_ratio, c, roofline, draft_lengths) for c in loads)
    at = serving_concurrency or rows[0].concurrency
    row = min(rows, key=lambda r: (abs(r.concurrency - at), r.concurrency))
    losing = [r.concurrency for r in rows if r.best_speedup <= 1.0]
    reason = (
        f"k={row.best_k} maximises the estimated speedup ({row.best_speedup:.2f}x) at "
        f"concurrency {row.concurrency} for alpha={alpha:.2f}, cost ratio c={cost_ratio:.3f}"
    )
    return SpeedupEstimate(
        LABEL, alpha, cost_ratio, rows, row.best_k, losing[0] if losing else None, reason
    )


def _load(
    alpha: float, cost_ratio: float, concurrency: int, roofline: Roofline | None, ks: Sequence[int]
) -> LoadEstimate:
    pairs = tuple((k, speedup(alpha, k, cost_ratio, concurrency, roofline)) for k in ks)
    best_k, best = max(pairs, key=lambda pair: (pair[1], -pair[0]))
    return LoadEstimate(concurrency, pairs, best_k, best)


def cost_ratio_from_weights(draft_weight_bytes: float, target_weight_bytes: float) -> float:
    """c for a memory-bound draft: its step reads its weights, the target's step reads the
    target's (Leviathan et al. §3.4 approximate c by the ratio of model sizes)."""
    return draft_weight_bytes / target_weight_bytes if target_weight_bytes > 0 else 0.0


def estimate_for_deployment(
    memory: MemoryFacts,
    gpu: GpuSpec,
    alpha: float,
    *,
    cost_ratio: float | None = None,
    context_tokens: float = DEFAULT_CONTEXT_TOKENS,
    bytes_per_param: float = BF16_BYTES,
) -> SpeedupEstimate:
    """The estimate for one planned deployment (per GPU, as the memory budget is): weights and
    KV from the budget, bandwidth and FLOPS from the GPU catalog. `cost_ratio` defaults to the
    draft/target weight ratio (0 for n-gram, which has no draft weights); parameters are taken
    as weight bytes / `bytes_per_param` (dense BF16 by default: MoE and quantised targets do
    less compute per byte, so their estimate is pessimistic under load)."""
    weight_bytes = memory.target_weights_gib * GIB
    roofline = roofline_for(
        gpu,
        weight_bytes=weight_bytes,
        active_params=weight_bytes / bytes_per_param,
        kv_bytes_per_token=memory.target_kv_bytes_per_token,
        context_tokens=context_tokens,
    )
    ratio = (
        cost_ratio
        if cost_ratio is not None
        else cost_ratio_from_weights(memory.draft_weights_gib * GIB, weight_bytes)
    )
    top = max(memory.max_concurrency, memory.requested_concurrency, 1)
    loads = sorted({c for c in LOADS if c <= top} | {memory.requested_concurrency, 1})
    result = estimate(
        alpha, ratio, roofline, loads=loads, serving_concurrency=memory.requested_concurrency
    )
    assumptions: tuple[tuple[str, float | str], ...] = (
        ("context_tokens", context_tokens),
        ("bytes_per_param", bytes_per_param),
        ("gpu_bandwidth_tbps", gpu.bandwidth_tbps),
        ("gpu_bf16_tflops", gpu.bf16_tflops if gpu.bf16_tflops is not None else "unknown"),
        ("alpha", "per-token acceptance probability (Leviathan et al.), given by the caller"),
    )
    return dataclasses.replace(result, assumptions=assumptions)
