"""Engine seam: everything specdeploy knows about one engine sits behind the `Engine` protocol.

An engine turns a `LaunchSpec` into exactly how it is started (`EngineLaunch`), and owns the rest
of its behaviour too: its memory model (`EngineMemory`: how its memory knob is spelt and what it
means, what it profiles and captures), how its Prometheus metrics read (`EngineMetrics`), its
shared-memory needs, its multi-node commands, the code-level facts rules consult, and the
compatibility rules that only concern it. Nothing outside `orchestrator/engines/` compares engine
names. `launch()` is pure and deterministic: no I/O, no clock, no randomness; golden files
depend on it. This module imports nothing at run time, so the registry stays light.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, ClassVar, Protocol

if TYPE_CHECKING:
    from orchestrator.checkpoint.info import CheckpointInfo
    from orchestrator.compatibility.rule import Rule
    from orchestrator.engines.capabilities import EngineRelease
    from orchestrator.engines.metrics import Acceptance, PhaseTimes, Samples, Serving
    from orchestrator.engines.names import EngineName
    from orchestrator.memory.estimate import MemoryEstimate
    from orchestrator.memory.gpus import Gpu
    from orchestrator.memory.kv import KvPool, StateSlots
    from orchestrator.memory.weights import WeightSharding
    from orchestrator.profile.schema import KvCacheDtype, Profile, SpecMethod


@dataclass(frozen=True)
class LaunchSpec:
    """What an engine module needs to build its launch, with model locations already chosen
    (hub id, absolute local path, or in-container mount path)."""

    profile: Profile
    release: EngineRelease
    target_model: str
    draft_model: str | None
    memory_fraction: float
    """The engine's own memory knob, already translated from serving.gpu_memory_fraction."""
    served_model_name: str
    """Name clients use in requests; the same for a speculative launch and its baseline."""
    target_model_type: str | None = None
    """config.json model_type of the target, when known (some releases spell methods per family)."""
    host: str = "0.0.0.0"
    config_dir: str = "/etc/specdeploy"
    """Where engine config files are found at run time (a ConfigMap mount, or the render dir)."""

    @property
    def method(self) -> SpecMethod:
        return self.profile.proposer.method

    @property
    def speculative(self) -> bool:
        return self.profile.speculative


@dataclass(frozen=True)
class ModelDownload:
    """A hub checkpoint the deploy target fetches into `target_dir` before the engine starts
    (for engine releases that only load some models from a local directory)."""

    repo_id: str
    revision: str | None
    """Hub commit, tag or branch; None means the default branch."""
    target_dir: str
    """Absolute directory inside the engine container; the launch refers to the model by it."""

    def as_json(self) -> dict[str, object]:
        return {"repo_id": self.repo_id, "revision": self.revision, "target_dir": self.target_dir}


@dataclass(frozen=True)
class EngineLaunch:
    """How to start one engine process: image, argv (one token per element), env and files."""

    engine: EngineName
    version: str
    image: str
    argv: tuple[str, ...]
    port: int
    health_path: str
    """Liveness: the process serves HTTP."""
    ready_path: str
    """Readiness: the model answers (may be the same as health_path)."""
    metrics_path: str
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    """Environment without secret values (secrets are referenced by the deploy target)."""
    config_files: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    """File name -> content, written beside launch.json and mounted at `config_dir`."""
    config_dir: str = "/etc/specdeploy"
    downloads: tuple[ModelDownload, ...] = ()
    """Models to fetch before the engine starts (a Kubernetes init container); the argv and
    config files already name them by their `target_dir`."""

    def as_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "engine": self.engine,
            "version": self.version,
            "image": self.image,
            "argv": list(self.argv),
            "env": dict(sorted(self.env.items())),
            "port": self.port,
            "health_path": self.health_path,
            "ready_path": self.ready_path,
            "metrics_path": self.metrics_path,
            "config_files": sorted(self.config_files),
        }
        if self.downloads:  # only launches that need one carry the key
            out["downloads"] = [d.as_json() for d in self.downloads]
        return out


@dataclass(frozen=True)
class KvDtypeVerdict:
    """What an engine release does with an fp8 KV cache on one GPU architecture."""

    refused: bool
    """True: the release's code refuses it at start-up; False: it may run but no code or
    documentation of the release confirms it (unverified)."""
    reason: str
    """What the engine does, in one clause (which backend, which check)."""
    source: str
    """Where that was read: the engine's code or docs at the release, file and line."""
    fix: str = ""
    """What to set instead, when there is something better than "another GPU or dtype"."""


@dataclass(frozen=True)
class ScheduleSupport:
    """What an engine release does with a draft-length schedule by batch size."""

    supported: bool | None
    """True: the release reads it and specdeploy renders it; False: specdeploy cannot render it
    for this engine (it has no such setting, or one specdeploy does not map); None: the release
    was not checked."""
    reason: str
    """What the engine has instead, or what was and was not checked, in one clause."""
    source: str
    """Where that was read: the engine's code or docs at the release."""


@dataclass(frozen=True)
class Collectives:
    """GPU memory one rank's collective communication holds (GiB), as the engine accounts it."""

    init_gib: float = 0.0
    """Created with the parallel groups, before the weights load: NCCL communicators, custom
    all-reduce and symmetric-memory buffers."""
    warmup_gib: float = 0.0
    """Allocated by the first collectives of the profile / warm-up forward pass (NCCL connects
    its channels lazily), and still held when the engine measures what is left for KV."""
    init_in_budget: bool = True
    """The engine counts `init_gib` inside its memory knob (its memory baseline is taken before
    the parallel groups exist). False: it sits outside the knob, like the CUDA context."""


class EngineMemory(Protocol):
    """How one engine spends GPU memory, as far as the budget needs to know.

    The budget (`orchestrator.memory.budget`) does the engine-neutral arithmetic (weights, KV per
    token, capacity); this model supplies what differs by engine and release."""

    knob: ClassVar[str]
    """The engine's memory setting as it is spelt (e.g. "gpu_memory_utilization")."""

    def knob_without_estimate(self, profile: Profile) -> float:
        """The knob rendered when no budget could be estimated (unknown size, CPU device)."""
        ...

    def knob_for(self, estimate: MemoryEstimate) -> float:
        """serving.gpu_memory_fraction translated into this engine's knob and its semantics, so
        the engine sizes the KV cache the estimate planned."""
        ...

    def kv_gib_at(self, estimate: MemoryEstimate, knob: float) -> float:
        """The KV cache (GiB per GPU) the engine sizes with its knob at `knob`: the inverse of
        `knob_for`, used to compare the model with values engines logged."""
        ...

    def profiled_tokens(self, profile: Profile, gpu: Gpu) -> int:
        """Tokens in the engine's profiling / warm-up forward pass."""
        ...

    def sampler_bytes_per_logit(self, profile: Profile) -> float:
        """Peak bytes per (request x vocabulary) entry of the sampler warm-up."""
        ...

    def cuda_graph_gib(self, profile: Profile, target: CheckpointInfo, gpu: Gpu) -> float:
        """CUDA-graph memory per GPU (0 when the profile disables graphs)."""
        ...

    def graphs_in_budget(self, profile: Profile) -> bool:
        """Whether CUDA graphs are captured inside the engine's knob (False: outside it)."""
        ...

    def weight_sharding(self, profile: Profile) -> WeightSharding:
        """Over how many GPUs each kind of weight is split, given the profile's parallelism."""
        ...

    def non_torch_gib(self, profile: Profile) -> float:
        """Memory outside torch (cuBLAS and allocator workspaces) one rank holds without any
        collective, as the engine's profiling counts it."""
        ...

    def collectives(self, profile: Profile, target: CheckpointInfo, gpu: Gpu) -> Collectives:
        """Memory the parallel groups' collectives hold per GPU (none for one GPU)."""
        ...

    def in_flight_tokens(self, profile: Profile, gpu: Gpu) -> int:
        """Tokens scheduled but not yet settled, which a sliding-window or chunked-attention
        layer holds besides its window when the engine bounds a sequence's blocks."""
        ...

    def state_slots(self, profile: Profile) -> StateSlots:
        """How much recurrent (linear-attention / Mamba) state one sequence holds with the
        profile's speculation."""
        ...

    def logged_kv_tokens(self, profile: Profile, pool: KvPool) -> int:
        """The KV-cache size in tokens the engine logs at start-up for this pool (it may differ
        from the real capacity for hybrid layouts)."""
        ...


class EngineMetrics(Protocol):
    """How an engine's Prometheus metrics read: acceptance and per-phase times over an interval
    between two scrapes. Each returns None when the scrape is not this engine's."""

    #: Its /metrics time each finished request end to end and count its output tokens, whose
    #: quotient (request time per output token) the operator's `switch` compares between twins.
    times_requests: ClassVar[bool]
    #: Its /metrics count acceptance per drafted position, which the operator's `retune` reads.
    accepts_per_position: ClassVar[bool]

    def acceptance(self, before: Samples, after: Samples) -> Acceptance | None: ...

    def phase_times(self, before: Samples, after: Samples) -> PhaseTimes | None: ...

    def serving(self, before: Samples, after: Samples) -> Serving | None: ...


class Engine(Protocol):
    """Turns the engine-neutral LaunchSpec into exactly how one engine is launched, and answers
    every engine-specific question the other stages ask."""

    name: ClassVar[EngineName]
    #: Flags this engine module renders itself -> the profile field that sets each (or
    #: "(set by specdeploy)"); extra_args may not set them.
    managed_flags: ClassVar[Mapping[str, str]]
    #: serving.kv_cache_dtype -> the engine's own spelling; a dtype missing here is refused.
    kv_cache_dtypes: ClassVar[Mapping[str, str]]
    #: Why specdeploy renders no multi-node group for this engine; None when `multi_node` works.
    multi_node_gap: ClassVar[str | None]
    #: /dev/shm size limit (a Kubernetes quantity) for the engine's pods and containers.
    shm_size: ClassVar[str]
    #: The engine serves EAGLE-1/2 heads (else only EAGLE-3).
    serves_eagle1_heads: ClassVar[bool]
    #: An EAGLE-3 head given as EAGLE-1/2 loads and runs, with acceptance ~1.0 (else it fails
    #: to load).
    runs_eagle3_head_as_eagle1: ClassVar[bool]
    memory: ClassVar[EngineMemory]
    metrics: ClassVar[EngineMetrics]

    def launch(self, spec: LaunchSpec) -> EngineLaunch: ...

    def multi_node(
        self, argv: Sequence[str], *, nodes: int, rank: str, leader_address: str
    ) -> tuple[list[str], list[str]]:
        """(leader, worker) commands of one replica spread over `nodes` nodes. `argv` is the
        single-node launch; `rank` and `leader_address` may be references the deploy target
        expands in each pod. Only called when `multi_node_gap` is None."""
        ...

    def speculative_flags(self) -> frozenset[str]:
        """Flags (or config keys) that only a speculative launch carries."""
        ...

    def draft_tensor_parallel_choices(
        self, method: SpecMethod, target_tp: int
    ) -> tuple[int, ...] | None:
        """The draft tensor parallel sizes the engine accepts, or None when it has no separate
        draft TP setting (the draft runs at the target's)."""
        ...

    def attention_data_parallel_sizes(self, tensor_parallel_size: int) -> tuple[int, ...]:
        """The attention data-parallel group counts this engine can run at that TP size."""
        ...

    def reads_speculators_heads(self, release: EngineRelease) -> bool | None:
        """Whether this release loads EAGLE heads in the speculators format (a `speculators_config`
        in config.json); None when that could not be checked in its code."""
        ...

    def speculates_with_pipeline_parallel(self, release: EngineRelease, method: SpecMethod) -> bool:
        """Whether this release runs this speculative method with pipeline parallelism."""
        ...

    def reads_batch_size_schedule(self, release: EngineRelease) -> ScheduleSupport:
        """Whether this release takes proposer.num_speculative_tokens_per_batch_size (a draft
        length per batch-size range) as specdeploy renders it: supported, absent (the launch could
        not carry it) or unchecked at this release, with where that was read."""
        ...

    def schedule_blocked_by(self, profile: Profile) -> str | None:
        """Why this engine would run one draft length at every load although the release reads
        schedules (the method or the layout it cannot adapt), in the engine's own terms; None
        when the profile's schedule runs as written."""
        ...

    def fp8_kv_cache_on(
        self, release: EngineRelease, gpu: Gpu, dtype: KvCacheDtype, *, mla: bool | None
    ) -> KvDtypeVerdict | None:
        """What this release does with an fp8 `dtype` KV cache on `gpu` (`mla`: whether the
        target uses multi-head latent attention; None when unknown). None: the release's code or
        documentation accepts it there."""
        ...

    def draft_vocab_must_match(self, release: EngineRelease) -> bool:
        """A draft_model's vocab_size must equal the target's, padding included, at this
        release (else the engine refuses to start)."""
        ...

    def rules(self) -> tuple[Rule, ...]:
        """Compatibility rules that only concern this engine (run only for its profiles)."""
        ...
