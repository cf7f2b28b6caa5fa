"""Engine seam: an engine turns a `LaunchSpec` into exactly how it is started (`EngineLaunch`).

`launch()` is pure and deterministic: no I/O, no clock, no randomness; golden files depend on it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, ClassVar, Protocol

from orchestrator.profile.schema import EngineName, Profile, SpecMethod

if TYPE_CHECKING:
    from orchestrator.engines.capabilities import EngineRelease


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


class Engine(Protocol):
    """Turns the engine-neutral LaunchSpec into exactly how one engine is launched."""

    name: ClassVar[EngineName]
    #: Flags this engine module renders itself; extra_args may not set them.
    managed_flags: ClassVar[frozenset[str]]
    #: serving.kv_cache_dtype -> the engine's own spelling; a dtype missing here is refused.
    kv_cache_dtypes: ClassVar[Mapping[str, str]]

    #: Why specdeploy renders no multi-node group for this engine; None when `multi_node` works.
    multi_node_gap: ClassVar[str | None]

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
