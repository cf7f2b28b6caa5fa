"""Analytic speedup estimate for `plan --speedup` and `suggest`: an ESTIMATE, never a measurement.

Model (Leviathan, Kalman & Matias 2023, "Fast Inference from Transformers via Speculative
Decoding", ICML, arXiv:2211.17192):
- a draft of k tokens commits on average E(k) tokens per target step, bonus token included. With
  one acceptance rate α for every position E = (1 - α^(k+1)) / (1 - α) (their Eq. 1); with
  per-position rates (`acceptance.AcceptanceCurve`) E = 1 + Σ_i Π_{j≤i} rate_j;
- each step costs k draft forwards plus one target verification of k + 1 tokens; at batch 1 in
  the memory-bound regime verification costs one ordinary step, giving their speedup
  E / (c·k + 1) with c = draft step time / target step time (Theorem 3.8).
Load is added with a roofline for one decode step of B sequences, each verifying n tokens:
  t(B, n) = max((W(B·n) + B·L·kv) / BW, 2·P·B·n / FLOPS)
(weights read W, parameters computed per token P, context L tokens per sequence, kv bytes per
token, GPU bandwidth BW and dense FLOPS from the GPU catalog). A dense model reads all its
weights; an MoE model reads its shared weights plus the experts its B·n tokens route to (`Experts`:
with E experts and top-k routing, uniform routing hits E·(1 - (1 - k/E)^(B·n)) of them), and
computes only the active parameters. So verifying k + 1 tokens is almost free for a dense model
while memory-bound, but reads up to k + 1 times the experts of a plain step for an MoE model at
low batch. Once B·(k + 1) passes the critical batch the extra tokens cost compute, which is why
speculation stops paying under load (vLLM docs, dynamic speculative decoding: "when BS*K goes
beyond a critical BS then SD negatively impacts the decode speed"). Long contexts delay that point:
every sequence's KV cache is read each step (MagicDec, Chen et al. 2024). A draft step is either
c × the target's step at the same batch, or its own roofline (`DraftCost`). Real engines add
scheduling and sampling overheads this ignores, so use `specdeploy bench` for the decision.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from orchestrator.bench.acceptance import Acceptance, AcceptanceCurve

LABEL: Final = (
    "analytic estimate (Leviathan et al. 2023 expected tokens per step and a decode roofline that "
    "counts the weights each step touches); not a measurement: confirm with `specdeploy bench`"
)
DRAFT_LENGTHS: Final = (1, 2, 3, 4, 5, 6, 7, 8)
LOADS: Final = (1, 2, 4, 8, 16, 32, 64, 128)
TB: Final = 1e12
GIB: Final = 1024**3
DEFAULT_CONTEXT_TOKENS: Final = 1024
"""Assumed mean context per decoding sequence when the caller does not know its workload."""


@dataclass(frozen=True)
class Experts:
    """The routed experts of an MoE model on one GPU."""

    routed_bytes: float
    total: int
    per_token: int

    def hit_fraction(self, tokens: float) -> float:
        """Expected share of experts at least one of `tokens` routes to (uniform top-k routing;
        real routing is skewed, so fewer are hit and this errs towards more bytes read)."""
        return float(1.0 - (1.0 - self.per_token / self.total) ** tokens)


@dataclass(frozen=True)
class Roofline:
    """One target decode step's cost on one GPU (or one tensor-parallel group, summed)."""

    bandwidth_bytes_per_s: float
    flops_per_s: float | None
    """Dense peak; None = treat the step as memory-bound at every batch."""
    weight_bytes: float
    active_params: float
    """Parameters multiplied per token (all of them for a dense model, the active ones for MoE)."""
    kv_bytes_per_token: float
    context_tokens: float
    """Mean tokens in context per sequence while decoding (prompt + half the output)."""
    experts: Experts | None = None

    def weight_bytes_read(self, tokens: float) -> float:
        """Weight bytes one forward over `tokens` tokens reads."""
        if self.experts is None:
            return self.weight_bytes
        routed = self.experts.routed_bytes
        return self.weight_bytes - routed + routed * self.experts.hit_fraction(tokens)

    def memory_s(self, batch: int, tokens_per_sequence: int) -> float:
        kv = batch * self.context_tokens * self.kv_bytes_per_token
        weights = self.weight_bytes_read(batch * tokens_per_sequence)
        return (weights + kv) / self.bandwidth_bytes_per_s

    def compute_s(self, batch: int, tokens_per_sequence: int) -> float:
        if self.flops_per_s is None:
            return 0.0
        return 2.0 * self.active_params * batch * tokens_per_sequence / self.flops_per_s

    def step_s(self, batch: int, tokens_per_sequence: int) -> float:
        """Seconds for one target forward over `batch` sequences of `tokens_per_sequence`."""
        return max(
            self.memory_s(batch, tokens_per_sequence), self.compute_s(batch, tokens_per_sequence)
        )


@dataclass(frozen=True)
class DraftCost:
    """One draft forward on one GPU, on the target's roofline (same bandwidth and FLOPS)."""

    weight_bytes: float
    kv_bytes_per_token: float
    params: float
    """Parameters multiplied per drafted token."""
    routed_share: float = 0.0
    """Share of the draft's weight bytes in routed experts that route like the target's (the MTP
    layer of an MoE target): only the experts hit are read."""

    def step_s(self, roofline: Roofline, batch: int) -> float:
        routed = self.weight_bytes * self.routed_share
        hit = roofline.experts.hit_fraction(batch) if roofline.experts is not None else 1.0
        weights = self.weight_bytes - routed + routed * hit
        kv = batch * roofline.context_tokens * self.kv_bytes_per_token
        memory = (weights + kv) / roofline.bandwidth_bytes_per_s
        if roofline.flops_per_s is None:
            return memory
        return max(memory, 2.0 * self.params * batch / roofline.flops_per_s)


class GpuSpec(Protocol):
    """What the roofline needs from a GPU catalog entry (orchestrator.memory.gpus.Gpu fits)."""

    @property
    def bandwidth_tbps(self) -> float: ...

    @property
    def bf16_tflops(self) -> float | None: ...


def roofline_for(
    gpu: GpuSpec,
    *,
    weight_bytes: float,
    active_params: float,
    kv_bytes_per_token: float,
    context_tokens: float,
    gpus: int = 1,
    experts: Experts | None = None,
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
        experts,
    )


def expected_tokens_per_step(alpha: float, k: int) -> float:
    """Leviathan et al. Eq. 1: mean tokens committed per target step (bonus token included)."""
    if alpha >= 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def alpha_from_acceptance_length(mean_length: float, k: int) -> float:
    """Invert Eq. 1: the α that gives a measured mean acceptance length (e.g. from `bench`)."""
    return AcceptanceCurve.matching(mean_length, k).first


def alpha_from_acceptance_rate(rate: float, k: int) -> float:
    """α from an engine's draft acceptance rate (accepted / drafted tokens, as vLLM reports it):
    with k drafted per step, mean acceptance length = 1 + rate·k (vLLM's spec-decode metrics,
    https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/v1/spec_decode/metrics.py#L108-L114)."""
    return alpha_from_acceptance_length(1.0 + rate * k, k)


Accepts = float | AcceptanceCurve
"""One acceptance rate for every position (Leviathan et al.), or per-position rates."""
Cost = float | DraftCost
"""A draft step as a fraction c of the target's step, or the draft's own roofline."""


def speedup(
    acceptance: Accepts, k: int, cost: Cost, batch: int, roofline: Roofline | None
) -> float:
    """Estimated decode speedup (tokens per unit time, speculative over plain) at one load."""
    curve = acceptance if isinstance(acceptance, AcceptanceCurve) else AcceptanceCurve(acceptance)
    tokens = curve.mean_length(k)
    if roofline is None:
        if isinstance(cost, DraftCost):
            raise ValueError("a DraftCost needs a roofline to be timed")
        return tokens / (cost * k + 1.0)  # Leviathan et al. Theorem 3.8
    plain = roofline.step_s(batch, 1)
    draft = cost * plain if isinstance(cost, float | int) else cost.step_s(roofline, batch)
    return tokens * plain / (k * draft + roofline.step_s(batch, k + 1))


def cost_ratio(cost: Cost, roofline: Roofline | None) -> float:
    """c at batch 1: the draft step's time over the plain target step's."""
    if isinstance(cost, float | int):
        return float(cost)
    if roofline is None:
        raise ValueError("a DraftCost needs a roofline to be timed")
    return cost.step_s(roofline, 1) / roofline.step_s(1, 1)


@dataclass(frozen=True)
class LoadEstimate:
    """Speedup per draft length at one load, and the best draft length there."""

    concurrency: int
    speedups: tuple[tuple[int, float], ...]
    best_k: int
    best_speedup: float
    scheduled_k: int | None = None
    """The draft length the profile's schedule (proposer.num_speculative_tokens_per_batch_size)
    runs at this load; None without a schedule."""
    scheduled_speedup: float | None = None
    """The estimated speedup at `scheduled_k` (1.0 where it is 0: plain decoding)."""

    def at(self, k: int) -> float:
        return dict(self.speedups)[k]


@dataclass(frozen=True)
class Disagreement:
    """A load where the estimate finds a gain while a rule warns that speculation stops paying."""

    concurrency: int
    num_speculative_tokens: int
    rule: str
    estimated_speedup: float
    why: str

    def as_json(self) -> dict[str, object]:
        return {
            "concurrency": self.concurrency,
            "num_speculative_tokens": self.num_speculative_tokens,
            "rule": self.rule,
            "estimated_speedup": round(self.estimated_speedup, 4),
            "why": self.why,
        }


@dataclass(frozen=True)
class SpeedupEstimate:
    """The `speedup_estimate` block of `plan --format json` and each `suggest` option's figures."""

    label: str
    alpha: float
    """The single per-token rate (Leviathan's α) giving the same mean acceptance length at the
    recommended draft length."""
    cost_ratio: float
    loads: tuple[LoadEstimate, ...]
    recommended_num_speculative_tokens: int
    """Best draft length at the load the deployment serves; see `reason`."""
    stops_paying_at: int | None
    """Lowest estimated load where even the best draft length gives speedup <= 1."""
    reason: str
    assumptions: tuple[tuple[str, float | str], ...] = ()
    acceptance: Acceptance | None = None
    disagreements: tuple[Disagreement, ...] = ()

    def row(self, concurrency: int) -> LoadEstimate:
        """The estimate at the load nearest `concurrency`."""
        return min(self.loads, key=lambda r: (abs(r.concurrency - concurrency), r.concurrency))

    def as_json(self) -> dict[str, object]:
        k = self.recommended_num_speculative_tokens
        return {
            "label": self.label,
            "alpha": round(self.alpha, 4),
            "cost_ratio": round(self.cost_ratio, 5),
            "acceptance": self.acceptance.as_json(k) if self.acceptance is not None else None,
            "recommended_num_speculative_tokens": k,
            "stops_paying_at": self.stops_paying_at,
            "reason": self.reason,
            "disagreements": [d.as_json() for d in self.disagreements],
            "assumptions": dict(self.assumptions),
            "loads": [_load_json(load) for load in self.loads],
        }


def _load_json(load: LoadEstimate) -> dict[str, object]:
    out: dict[str, object] = {
        "concurrency": load.concurrency,
        "best_k": load.best_k,
        "best_speedup": round(load.best_speedup, 4),
        "speedup_by_k": {str(k): round(s, 4) for k, s in load.speedups},
    }
    if load.scheduled_k is not None and load.scheduled_speedup is not None:
        out["scheduled_k"] = load.scheduled_k  # only profiles with a schedule carry these
        out["scheduled_speedup"] = round(load.scheduled_speedup, 4)
    return out


def with_schedule(
    found: SpeedupEstimate,
    draft_length: Callable[[int], int],
    acceptance: Accepts,
    cost: Cost,
    roofline: Roofline | None,
) -> SpeedupEstimate:
    """The estimate with each load's speedup at the draft length a schedule runs there
    (`draft_length(concurrency)`, taking the load's sequences as the batch size); a draft
    length of 0 is plain decoding, 1.0 by definition."""
    rows = []
    for row in found.loads:
        k = draft_length(row.concurrency)
        gain = speedup(acceptance, k, cost, row.concurrency, roofline) if k > 0 else 1.0
        rows.append(dataclasses.replace(row, scheduled_k=k, scheduled_speedup=gain))
    return dataclasses.replace(found, loads=tuple(rows))


def estimate(
    acceptance: Accepts,
    cost: Cost,
    roofline: Roofline | None,
    *,
    loads: Sequence[int] = LOADS,
    draft_lengths: Sequence[int] = DRAFT_LENGTHS,
    serving_concurrency: int | None = None,
) -> SpeedupEstimate:
    """Speedup vs draft length and load, recommending num_speculative_tokens for the load the
    deployment serves (`serving_concurrency`, else the lowest load)."""
    curve = acceptance if isinstance(acceptance, AcceptanceCurve) else AcceptanceCurve(acceptance)
    ratio = cost_ratio(cost, roofline)
    if not 0.0 <= curve.first <= 1.0 or ratio < 0.0:
        raise ValueError(f"alpha={curve.first} must be in [0, 1] and cost_ratio={ratio} >= 0")
    if roofline is None:
        loads = loads[:1]  # without a roofline the estimate does not depend on load
    rows = tuple(_load(curve, cost, c, roofline, draft_lengths) for c in loads)
    at = serving_concurrency or rows[0].concurrency
    row = min(rows, key=lambda r: (abs(r.concurrency - at), r.concurrency))
    losing = [r.concurrency for r in rows if r.best_speedup <= 1.0]
    alpha = alpha_from_acceptance_length(curve.mean_length(row.best_k), row.best_k)
    reason = (
        f"k={row.best_k} maximises the estimated speedup ({row.best_speedup:.2f}x) at "
        f"concurrency {row.concurrency}: {curve.mean_length(row.best_k):.2f} tokens per step, "
        f"draft/target cost ratio c={ratio:.3f}"
    )
    return SpeedupEstimate(
        LABEL, alpha, ratio, rows, row.best_k, losing[0] if losing else None, reason
    )


def _load(
    curve: AcceptanceCurve,
    cost: Cost,
    concurrency: int,
    roofline: Roofline | None,
    ks: Sequence[int],
) -> LoadEstimate:
    pairs = tuple((k, speedup(curve, k, cost, concurrency, roofline)) for k in ks)
    best_k, best = max(pairs, key=lambda pair: (pair[1], -pair[0]))
    return LoadEstimate(concurrency, pairs, best_k, best)


def cost_ratio_from_weights(draft_weight_bytes: float, target_weight_bytes: float) -> float:
    """c for a memory-bound draft: its step reads its weights, the target's step reads the
    target's (Leviathan et al. §3.4 approximate c by the ratio of model sizes)."""
    return draft_weight_bytes / target_weight_bytes if target_weight_bytes > 0 else 0.0
