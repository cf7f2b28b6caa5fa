"""The memory estimate's types: what the heaviest GPU of a replica holds, itemised
(`MemoryEstimate`), the engine's overheads (`Overheads`) and the changes that would fit
(`Suggestion`). Plain data beneath both the engines and the budget arithmetic, so that engines can
return and read estimates without importing the budget, which reads the engine registry."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from orchestrator.memory import kv
from orchestrator.memory.gpus import GIB

if TYPE_CHECKING:
    from orchestrator.engines.names import EngineName
    from orchestrator.profile.schema import SpecMethod


@dataclass(frozen=True)
class Overheads:
    """Memory one GPU needs besides weights and KV cache, and which of it the engine budgets."""

    activation_gib: float
    """The profile run's peak: the larger of `forward_gib` and `sampler_gib`."""
    cuda_graph_gib: float
    non_torch_gib: float
    """cuBLAS/allocator memory outside torch, without collectives."""
    nccl_gib: float
    """Collective buffers created with the parallel groups, before the weights load."""
    graphs_in_budget: bool
    """False when the engine captures CUDA graphs outside its own memory knob (vLLM < 0.21)."""
    profiled_tokens: int
    forward_gib: float = 0.0
    """Peak of the forward pass at `profiled_tokens` (MLP intermediates, MoE workspace)."""
    sampler_gib: float = 0.0
    """Peak of the sampler warm-up over `max_concurrency` dummy requests."""
    collective_warmup_gib: float = 0.0
    """Collective buffers the first forward pass allocates at TP > 1 (lazily connected NCCL
    channels), held from then on."""
    nccl_in_budget: bool = True
    """False when the engine's memory baseline is taken after the parallel groups exist, so
    `nccl_gib` sits outside its knob (vLLM >= 0.11)."""

    @property
    def total_gib(self) -> float:
        return (
            self.activation_gib
            + self.cuda_graph_gib
            + self.non_torch_gib
            + self.nccl_gib
            + self.collective_warmup_gib
        )

    @property
    def before_load_gib(self) -> float:
        """Memory in use before the engine loads weights (CUDA context, cuBLAS, NCCL)."""
        return self.non_torch_gib + self.nccl_gib

    @property
    def outside_torch_gib(self) -> float:
        """Everything outside torch: non-torch memory plus every collective buffer."""
        return self.non_torch_gib + self.nccl_gib + self.collective_warmup_gib


@dataclass(frozen=True)
class Suggestion:
    """One profile change and what the budget looks like after it."""

    change: str
    max_concurrency: int
    kv_cache_gib: float

    def as_json(self) -> dict[str, Any]:
        return {
            "change": self.change,
            "max_concurrency": self.max_concurrency,
            "kv_cache_gib": round(self.kv_cache_gib, 2),
        }


@dataclass(frozen=True)
class MemoryEstimate:
    """What the heaviest GPU of one replica holds, itemised. Sizes in GiB, KV in bytes/tokens."""

    gpu: str
    gpu_memory_gib: float
    gpu_usable_gib: float
    gpu_memory_fraction: float
    budget_gib: float
    engine: EngineName
    engine_fraction: float
    target_weights_gib: float
    draft_weights_gib: float
    overheads: Overheads
    kv_cache_gib: float
    target_kv_bytes_per_token: int
    draft_kv_bytes_per_token: int
    kv_fixed_bytes_per_sequence: int
    """Bytes per sequence that do not grow with it (windows, chunks, recurrent state)."""
    kv_tokens: int
    """The KV-cache size in tokens as the engine logs it at start-up (for hybrid layouts in some
    releases this is not the capacity; see `kv_capacity_tokens`)."""
    max_model_len: int
    requested_concurrency: int
    max_concurrency: int
    baseline_kv_cache_gib: float
    baseline_kv_tokens: int
    baseline_max_concurrency: int
    one_sequence_fits: bool
    method: SpecMethod
    tensor_parallel_size: int
    draft_tensor_parallel_size: int | None
    heaviest_rank: str
    engine_knob: str
    """How the engine spells its memory share (`--gpu-memory-utilization`, ...)."""
    kv_capacity_tokens: int = 0
    """What the cache really holds, in tokens of max_model_len sequences: `max_concurrency` per
    attention group x max_model_len when layers hold bounded spans, else whole blocks."""
    baseline_kv_capacity_tokens: int = 0
    baseline_kv_fixed_bytes_per_sequence: int = 0
    attention_data_parallel_size: int = 1
    """Attention groups of the replica; `max_concurrency` counts the sequences of all of them,
    `kv_tokens` what one GPU holds."""
    notes: tuple[str, ...] = ()
    suggestions: tuple[Suggestion, ...] = field(default=())
    typical_context_tokens: int | None = None
    """serving.typical_context_tokens, when set: the context a typical request holds."""
    typical_concurrency: int | None = None
    """Sequences of typical_context_tokens that fit with speculation."""
    baseline_typical_concurrency: int | None = None
    """The same without speculation."""

    @property
    def kv_bytes_per_token(self) -> int:
        return self.target_kv_bytes_per_token + self.draft_kv_bytes_per_token

    @property
    def overhead_gib(self) -> float:
        return self.overheads.total_gib

    @property
    def fits(self) -> bool:
        """What the engine requires to start: weights, overheads and one max_model_len sequence
        (DESIGN §4). Fewer full-length sequences than requested is a warning, not a refusal:
        engines treat the concurrency as a cap."""
        return self.one_sequence_fits

    @property
    def concurrency_fits(self) -> bool:
        """serving.max_concurrency sequences of max_model_len fit at once."""
        return self.max_concurrency >= self.requested_concurrency

    @property
    def meets_request(self) -> bool:
        return self.fits and self.concurrency_fits

    @property
    def one_sequence_gib(self) -> float:
        """Weights + overheads + KV for one max_model_len sequence: what the engine needs."""
        return self._needed_gib(1)

    @property
    def needed_gib(self) -> float:
        """Weights + overheads + KV for `requested_concurrency` sequences of max_model_len."""
        return self._needed_gib(self.requested_concurrency)

    def _needed_gib(self, sequences: int) -> float:
        per_seq = kv.sequence_bytes(
            self.kv_bytes_per_token, self.kv_fixed_bytes_per_sequence, self.max_model_len
        )
        fixed = self.target_weights_gib + self.draft_weights_gib + self.overhead_gib
        return fixed + per_seq * sequences / GIB

    def as_json(self) -> dict[str, Any]:
        """The `memory` block of docs/cli.md, extended with the itemisation."""
        o = self.overheads
        return {
            "gpu": self.gpu,
            "gpu_memory_gib": _r(self.gpu_memory_gib),
            "gpu_usable_gib": _r(self.gpu_usable_gib),
            "gpu_memory_fraction": self.gpu_memory_fraction,
            "budget_gib": _r(self.budget_gib),
            "engine_knob": self.engine_knob,
            "engine_fraction": self.engine_fraction,
            "target_weights_gib": _r(self.target_weights_gib),
            "draft_weights_gib": _r(self.draft_weights_gib),
            "overhead_gib": _r(self.overhead_gib),
            "activation_gib": _r(o.activation_gib),
            "cuda_graph_gib": _r(o.cuda_graph_gib),
            "non_torch_gib": _r(o.outside_torch_gib),
            "kv_cache_gib": _r(self.kv_cache_gib),
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "target_kv_bytes_per_token": self.target_kv_bytes_per_token,
            "draft_kv_bytes_per_token": self.draft_kv_bytes_per_token,
            "kv_fixed_bytes_per_sequence": self.kv_fixed_bytes_per_sequence,
            "kv_tokens": self.kv_tokens,
            "kv_capacity_tokens": self.kv_capacity_tokens,
            "baseline_kv_tokens": self.baseline_kv_tokens,
            "baseline_kv_capacity_tokens": self.baseline_kv_capacity_tokens,
            "baseline_kv_fixed_bytes_per_sequence": self.baseline_kv_fixed_bytes_per_sequence,
            "max_model_len": self.max_model_len,
            "requested_concurrency": self.requested_concurrency,
            "max_concurrency": self.max_concurrency,
            "baseline_max_concurrency": self.baseline_max_concurrency,
            "one_sequence_fits": self.one_sequence_fits,
            "fits": self.fits,
            "concurrency_fits": self.concurrency_fits,
            "one_sequence_gib": _r(self.one_sequence_gib),
            "needed_gib": _r(self.needed_gib),
            "typical_context_tokens": self.typical_context_tokens,
            "typical_concurrency": self.typical_concurrency,
            "baseline_typical_concurrency": self.baseline_typical_concurrency,
            "tensor_parallel_size": self.tensor_parallel_size,
            "attention_data_parallel_size": self.attention_data_parallel_size,
            "draft_tensor_parallel_size": self.draft_tensor_parallel_size,
            "heaviest_rank": self.heaviest_rank,
            "notes": list(self.notes),
            "suggestions": [s.as_json() for s in self.suggestions],
        }


def _r(value: float) -> float:
    return round(value, 2)
