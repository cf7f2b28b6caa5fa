"""What planning produces for one profile: a `DeploymentPlan` when nothing blocks it (launches and
manifest set computed once, for every command to share), or a `RejectedPlan` that says why not.

Both carry the findings, the memory estimate (when one could be made) and what the checkpoints
resolved to, so `validate`, `plan` and `render` report the same thing from the same computation.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Final

from orchestrator.compatibility.rule import Finding

if TYPE_CHECKING:
    from orchestrator.checkpoint.info import CheckpointInfo
    from orchestrator.engines.base import EngineLaunch
    from orchestrator.engines.capabilities import EngineRelease
    from orchestrator.manifests.context import ManifestSet
    from orchestrator.memory.budget import MemoryEstimate
    from orchestrator.profile.schema import Profile

#: Where local checkpoint directories are mounted inside engine containers.
CONTAINER_TARGET_DIR: Final = "/models/target"
CONTAINER_DRAFT_DIR: Final = "/models/draft"
#: Where engine config files (a ConfigMap) are mounted inside engine containers.
CONTAINER_CONFIG_DIR: Final = "/etc/specdeploy"


@dataclass(frozen=True)
class ModelLocation:
    """A model as the profile names it and, when it is a local directory, its absolute path."""

    ref: str
    local_dir: Path | None

    def for_launch(self, *, container: bool, mount: str) -> str:
        if self.local_dir is None:
            return self.ref
        return mount if container else str(self.local_dir)


@dataclass(frozen=True)
class Launches:
    """Every launch of one profile, computed once: the profile's own and its baseline twin (the
    same target, weights and flags without speculation), each with local paths (what
    `run --local` executes) and with in-container mount paths (what the manifests run)."""

    local: EngineLaunch
    container: EngineLaunch
    baseline_local: EngineLaunch
    baseline_container: EngineLaunch

    def get(self, *, container: bool, baseline: bool = False) -> EngineLaunch:
        if baseline:
            return self.baseline_container if container else self.baseline_local
        return self.container if container else self.local


@dataclass(frozen=True)
class _Outcome:
    profile_path: Path
    findings: tuple[Finding, ...]

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "error")

    def ok(self, *, strict: bool = False) -> bool:
        blocking = ("error", "warning") if strict else ("error",)
        return not any(f.severity in blocking for f in self.findings)

    def exit_code(self, *, strict: bool = False) -> int:
        """0, or the first of 3 (profile), 4 (incompatible), 5 (memory) that applies."""
        blocking = ("error", "warning") if strict else ("error",)
        codes = [f.exit_code for f in self.findings if f.severity in blocking]
        return min(codes) if codes else 0


@dataclass(frozen=True)
class RejectedPlan(_Outcome):
    """A profile that cannot be deployed as written: the findings say why. What could still be
    worked out (the profile, the checkpoints, the memory estimate) is kept for the reports."""

    profile: Profile | None = None
    release: EngineRelease | None = None
    target: CheckpointInfo | None = None
    draft: CheckpointInfo | None = None
    memory: MemoryEstimate | None = None


@dataclass(frozen=True)
class DeploymentPlan(_Outcome):
    """A profile with no error findings (warnings allowed): everything every command needs."""

    profile: Profile
    release: EngineRelease
    target: CheckpointInfo | None
    draft: CheckpointInfo | None
    memory: MemoryEstimate | None
    target_location: ModelLocation
    draft_location: ModelLocation | None
    launches: Launches
    manifest_inputs: ManifestInputs

    @cached_property
    def manifests(self) -> ManifestSet:
        """Every object of the plan (and the Helm chart's values), built on first use from the
        plan's own inputs: `validate` never needs them, and building them (with the module that
        describes them) costs each start about 8 ms. What could refuse them, a topology the
        workload cannot run, is checked when the plan is made."""
        from orchestrator.manifests.context import build_manifest_set

        return build_manifest_set(self.manifest_inputs)

    @property
    def launch(self) -> EngineLaunch:
        """The launch with local paths (what `run --local` executes)."""
        return self.launches.local

    @property
    def baseline_launch(self) -> EngineLaunch | None:
        """The baseline twin's local launch, when deploy.baseline asks for a twin."""
        if not self.profile.deploy.baseline:
            return None
        return self.launches.baseline_local

    def launch_for(self, *, container: bool, baseline: bool = False) -> EngineLaunch:
        """The engine launch; `container` maps local model directories to their mount paths."""
        return self.launches.get(container=container, baseline=baseline)


PlanResult = DeploymentPlan | RejectedPlan
"""What planning one profile gives."""


@dataclass(frozen=True)
class ManifestInputs:
    """What the manifest set is built from (a plan before its manifests exist)."""

    profile: Profile
    launches: Launches
    target: CheckpointInfo | None
    draft: CheckpointInfo | None
    target_location: ModelLocation
    draft_location: ModelLocation | None
