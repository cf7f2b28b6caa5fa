"""The pure pipeline: profile -> checkpoints -> rules -> memory -> engine launch.

Nothing here touches a cluster, a daemon or the clock. `build_plan` never raises for a user
error: a profile that cannot be loaded comes back as a plan whose findings say why.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from orchestrator.checkpoint.info import CheckpointInfo, Unresolved
from orchestrator.checkpoint.resolution import CheckpointResolver
from orchestrator.compatibility import CompatContext, Finding, check_compatibility
from orchestrator.engines import ENGINES, EngineLaunch, LaunchSpec
from orchestrator.engines.capabilities import EngineRelease, release_for
from orchestrator.errors import ProfileError
from orchestrator.memory.budget import MemoryEstimate, engine_memory_fraction, estimate_memory
from orchestrator.profile.loading import ProfileInvalid, load_profile
from orchestrator.profile.schema import Profile

#: Where local checkpoint directories are mounted inside engine containers.
CONTAINER_TARGET_DIR = "/models/target"
CONTAINER_DRAFT_DIR = "/models/draft"
#: Where engine config files (a ConfigMap) are mounted inside engine containers.
CONTAINER_CONFIG_DIR = "/etc/specdeploy"


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
class DeploymentPlan:
    """Everything the pure stages produced for one profile file."""

    profile_path: Path
    profile: Profile | None
    release: EngineRelease | None
    findings: tuple[Finding, ...]
    target: CheckpointInfo | None = None
    draft: CheckpointInfo | None = None
    memory: MemoryEstimate | None = None
    target_location: ModelLocation | None = None
    draft_location: ModelLocation | None = None

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

    @property
    def launch(self) -> EngineLaunch | None:
        """The launch with local paths (what `run --local` executes); None when invalid."""
        return self.launch_for(container=False)

    @property
    def baseline_launch(self) -> EngineLaunch | None:
        """The same launch without speculation, when deploy.baseline is set."""
        if self.profile is None or not self.profile.deploy.baseline:
            return None
        return self.launch_for(container=False, baseline=True)

    def launch_for(self, *, container: bool, baseline: bool = False) -> EngineLaunch | None:
        """The engine launch; `container` maps local model directories to their mount paths."""
        if self.profile is None or self.release is None or self.errors:
            return None
        assert self.target_location is not None
        profile = self.profile.as_baseline() if baseline else self.profile
        draft = None
        if self.draft_location is not None and not baseline:
            draft = self.draft_location.for_launch(container=container, mount=CONTAINER_DRAFT_DIR)
        spec = LaunchSpec(
            profile=profile,
            release=self.release,
            target_model=self.target_location.for_launch(
                container=container, mount=CONTAINER_TARGET_DIR
            ),
            draft_model=draft,
            memory_fraction=engine_memory_fraction(self.profile, self.memory),
            served_model_name=served_model_name(self.profile, self.target_location),
            target_model_type=self.target.model_type if self.target is not None else None,
            host="0.0.0.0" if container else "127.0.0.1",
            config_dir=CONTAINER_CONFIG_DIR if container else ".",
        )
        return ENGINES[profile.engine.name].launch(spec)


def build_plan(
    path: Path,
    *,
    offline: bool = False,
    ignore: frozenset[str] = frozenset(),
) -> DeploymentPlan:
    """Run every pure stage for one profile file."""
    try:
        profile = load_profile(path)
        release = release_for(profile.engine.name, profile.engine.version)
    except ProfileInvalid as exc:
        return DeploymentPlan(path, None, None, tuple(profile_findings(exc)))
    except ProfileError as exc:
        finding = Finding("profile.engine-version", "error", exc.what, exc.why, exc.fix)
        return DeploymentPlan(path, None, None, (finding,))
    base_dir = path.resolve().parent
    target_location = locate(profile.target.model, base_dir)
    draft_location = locate(profile.proposer.model, base_dir) if profile.proposer.model else None
    target, draft, unresolved = resolve_checkpoints(profile, base_dir, offline=offline)
    memory, memory_findings = estimate(profile, target, draft)
    ctx = CompatContext(
        profile=profile,
        release=release,
        target=target,
        draft=draft,
        memory=memory,
        unresolved=unresolved,
    )
    findings = sorted([*memory_findings, *check_compatibility(ctx, ignore)], key=Finding.sort_key)
    return DeploymentPlan(
        profile_path=path,
        profile=profile,
        release=release,
        findings=tuple(findings),
        target=target,
        draft=draft,
        memory=memory,
        target_location=target_location,
        draft_location=draft_location,
    )


def resolve_checkpoints(
    profile: Profile, base_dir: Path, *, offline: bool
) -> tuple[CheckpointInfo | None, CheckpointInfo | None, tuple[Unresolved, ...]]:
    """Metadata for the target and the proposer checkpoint, and what could not be found."""
    resolver = CheckpointResolver(base_dir=base_dir, offline=offline)
    target = resolver.resolve("target.model", profile.target.model, profile.target.revision)
    draft: CheckpointInfo | Unresolved | None = None
    if profile.proposer.model is not None:
        draft = resolver.resolve(
            "proposer.model", profile.proposer.model, profile.proposer.revision
        )
    unresolved = tuple(r for r in (target, draft) if isinstance(r, Unresolved))
    return _info(target), _info(draft), unresolved


def _info(found: CheckpointInfo | Unresolved | None) -> CheckpointInfo | None:
    return found if isinstance(found, CheckpointInfo) else None


def estimate(
    profile: Profile, target: CheckpointInfo | None, draft: CheckpointInfo | None
) -> tuple[MemoryEstimate | None, list[Finding]]:
    """The memory estimate, or the profile finding that prevents one (an unknown GPU name)."""
    try:
        return estimate_memory(profile, target, draft), []
    except ProfileError as exc:
        finding = Finding(
            "profile.invalid-value", "error", exc.what, exc.why, exc.fix, field="hardware.gpu"
        )
        return None, [finding]


def locate(model: str, base_dir: Path) -> ModelLocation:
    """A hub id stays as written; an existing local directory becomes an absolute path."""
    candidate = Path(model).expanduser()
    if not candidate.is_absolute():
        candidate = base_dir / candidate
    if candidate.is_dir():
        return ModelLocation(model, candidate.resolve())
    return ModelLocation(model, None)


def served_model_name(profile: Profile, target: ModelLocation) -> str:
    """Clients name the model by its hub id, or by the deployment name for a local directory."""
    return profile.metadata.name if target.local_dir is not None else profile.target.model


def profile_findings(exc: ProfileInvalid) -> list[Finding]:
    """One `profile.*` finding per problem, carrying the file position and field path."""
    out = []
    for issue in exc.issues:
        if issue.message.startswith("unknown field"):
            rule_id = "profile.unknown-field"
        elif issue.message.startswith("duplicate key"):
            rule_id = "profile.duplicate-key"
        elif issue.message == "required field is missing":
            rule_id = "profile.missing-field"
        elif issue.message.startswith("YAML syntax"):
            rule_id = "profile.yaml-syntax"
        else:
            rule_id = "profile.invalid-value"
        what = f"{issue.where(exc.file)}: {issue.path or '(top)'}: {issue.message}"
        fix = exc.fix if issue is exc.issues[0] else ProfileInvalid(exc.file, [issue]).fix
        out.append(Finding(rule_id, "error", what, exc.why, fix, field=issue.path))
    return out
