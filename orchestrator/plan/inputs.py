"""What a plan is made of before its manifests exist: where models sit (on the host and in
containers), every launch of the profile, and the inputs of the manifest set. Beneath both the
plan (`plan/types.py`) and the manifests (`manifests/context.py`), which each read these."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from orchestrator.checkpoint.info import CheckpointInfo
    from orchestrator.engines.base import EngineLaunch
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
class ManifestInputs:
    """What the manifest set is built from (a plan before its manifests exist)."""

    profile: Profile
    launches: Launches
    target: CheckpointInfo | None
    draft: CheckpointInfo | None
    target_location: ModelLocation
    draft_location: ModelLocation | None
