"""What planning produces for one profile: a `DeploymentPlan` when nothing blocks it (launches and
manifest set computed once, for every command to share), or a `RejectedPlan` that says why not.

Both carry the findings, the memory estimate (when one could be made) and what the checkpoints
resolved to, so `validate`, `plan` and `render` report the same thing from the same computation.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.compatibility.rule import Finding
from orchestrator.plan.inputs import CONTAINER_CONFIG_DIR as CONTAINER_CONFIG_DIR
from orchestrator.plan.inputs import CONTAINER_DRAFT_DIR as CONTAINER_DRAFT_DIR
from orchestrator.plan.inputs import CONTAINER_TARGET_DIR as CONTAINER_TARGET_DIR
from orchestrator.plan.inputs import Launches as Launches
from orchestrator.plan.inputs import ManifestInputs as ManifestInputs
from orchestrator.plan.inputs import ModelLocation as ModelLocation

if TYPE_CHECKING:
    from orchestrator.checkpoint.info import CheckpointInfo
    from orchestrator.engines.base import EngineLaunch
    from orchestrator.engines.capabilities import EngineRelease
    from orchestrator.manifests.context import ManifestSet
    from orchestrator.memory.estimate import MemoryEstimate
    from orchestrator.profile.schema import Profile


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
