"""Planning: profile -> checkpoints -> memory -> rules -> launches -> manifest set, once.

Nothing here touches a cluster, a daemon or the clock, and nothing raises for a user error: what
blocks a deployment comes back as findings in a `RejectedPlan`. `validate`, `plan`, `render`,
`apply`, `run` and `bench` all read the same `DeploymentPlan`, so they cannot disagree.
"""

from __future__ import annotations

from pathlib import Path

from orchestrator.checkpoint.info import CheckpointInfo, Unresolved
from orchestrator.compatibility import CompatContext, Finding, check_compatibility
from orchestrator.engines import ENGINES
from orchestrator.engines.base import EngineLaunch, LaunchSpec
from orchestrator.engines.capabilities import EngineRelease, release_for
from orchestrator.errors import OrchestratorError, ProfileError
from orchestrator.manifests.commands import topology
from orchestrator.memory.budget import engine_memory_fraction, estimate_memory
from orchestrator.memory.estimate import MemoryEstimate
from orchestrator.plan.resolver import CheckpointSource, LocalCheckpoints
from orchestrator.plan.types import (
    CONTAINER_CONFIG_DIR,
    CONTAINER_DRAFT_DIR,
    CONTAINER_TARGET_DIR,
    DeploymentPlan,
    Launches,
    ManifestInputs,
    ModelLocation,
    PlanResult,
    RejectedPlan,
)
from orchestrator.profile.loading import ProfileInvalid, load_profile
from orchestrator.profile.schema import Profile

#: Rule id of a finding raised by a stage (launch or manifests) without one of its own.
STAGE_RULE = "plan.stage"


def load_and_plan(
    path: Path, *, offline: bool = False, ignore: frozenset[str] = frozenset()
) -> PlanResult:
    """Load one profile file and plan it, resolving models relative to the file."""
    try:
        profile = load_profile(path)
    except ProfileInvalid as exc:
        return RejectedPlan(path, tuple(profile_findings(exc)))
    except ProfileError as exc:
        finding = Finding(exc.rule or "profile.unreadable", "error", exc.what, exc.why, exc.fix)
        return RejectedPlan(path, (finding,))
    source = LocalCheckpoints(base_dir=path.resolve().parent, offline=offline)
    return plan_profile(profile, source, profile_path=path, ignore=ignore)


def plan_profile(
    profile: Profile,
    source: CheckpointSource,
    *,
    profile_path: Path,
    ignore: frozenset[str] = frozenset(),
) -> PlanResult:
    """Every pure stage for one loaded profile; `profile_path` only labels the reports."""
    try:
        release = release_for(profile.engine.name, profile.engine.version)
    except ProfileError as exc:
        finding = Finding("profile.engine-version", "error", exc.what, exc.why, exc.fix)
        return RejectedPlan(profile_path, (finding,), profile=profile)
    target_location = source.locate(profile.target.model)
    draft_location = source.locate(profile.proposer.model) if profile.proposer.model else None
    target, draft, unresolved = resolve_checkpoints(profile, source)
    memory, findings = estimate(profile, target, draft)
    ctx = CompatContext(profile, release, target, draft, memory, unresolved)
    findings = sorted([*findings, *check_compatibility(ctx, ignore)], key=Finding.sort_key)
    refused = any(f.severity == "error" for f in findings)
    try:
        launches = build_launches(profile, release, target, memory, target_location, draft_location)
        inputs = ManifestInputs(profile, launches, target, draft, target_location, draft_location)
        topology(profile)  # what the manifest set would refuse; the set itself is built lazily
    except OrchestratorError as exc:
        stage = Finding(
            exc.rule or STAGE_RULE, "error", exc.what, exc.why, exc.fix, field=exc.field
        )
        findings = sorted([stage, *findings], key=Finding.sort_key)
        refused = True
    except Exception:
        # The stages run on a refused plan too, so that what they refuse is reported with the
        # rules' findings; a value a rule already refused may break them in other ways, which
        # says nothing new. On a plan no rule refused, such a failure is a bug: let it show.
        if not refused:
            raise
    if refused:
        return RejectedPlan(profile_path, tuple(findings), profile, release, target, draft, memory)
    return DeploymentPlan(
        profile_path=profile_path,
        findings=tuple(findings),
        profile=profile,
        release=release,
        target=target,
        draft=draft,
        memory=memory,
        target_location=target_location,
        draft_location=draft_location,
        launches=launches,
        manifest_inputs=inputs,
    )


def resolve_checkpoints(
    profile: Profile, source: CheckpointSource
) -> tuple[CheckpointInfo | None, CheckpointInfo | None, tuple[Unresolved, ...]]:
    """Metadata for the target and the proposer checkpoint, and what could not be found."""
    target = source.resolve("target.model", profile.target.model, profile.target.revision)
    draft: CheckpointInfo | Unresolved | None = None
    if profile.proposer.model is not None:
        draft = source.resolve("proposer.model", profile.proposer.model, profile.proposer.revision)
    unresolved = tuple(r for r in (target, draft) if isinstance(r, Unresolved))
    return _info(target), _info(draft), unresolved


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


def build_launches(
    profile: Profile,
    release: EngineRelease,
    target: CheckpointInfo | None,
    memory: MemoryEstimate | None,
    target_location: ModelLocation,
    draft_location: ModelLocation | None,
) -> Launches:
    """The profile's launch and its baseline twin, with local and with in-container paths."""

    def launch(container: bool, baseline: bool) -> EngineLaunch:
        draft = None
        if draft_location is not None and not baseline:
            draft = draft_location.for_launch(container=container, mount=CONTAINER_DRAFT_DIR)
        spec = LaunchSpec(
            profile=profile.as_baseline() if baseline else profile,
            release=release,
            target_model=target_location.for_launch(
                container=container, mount=CONTAINER_TARGET_DIR
            ),
            draft_model=draft,
            memory_fraction=engine_memory_fraction(profile, memory),
            served_model_name=served_model_name(profile, target_location),
            target_model_type=target.model_type if target is not None else None,
            host="0.0.0.0" if container else "127.0.0.1",
            config_dir=CONTAINER_CONFIG_DIR if container else ".",
        )
        return ENGINES[profile.engine.name].launch(spec)

    return Launches(
        local=launch(container=False, baseline=False),
        container=launch(container=True, baseline=False),
        baseline_local=launch(container=False, baseline=True),
        baseline_container=launch(container=True, baseline=True),
    )


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
        elif issue.message.startswith("cannot read the profile"):
            rule_id = "profile.unreadable"
        else:
            rule_id = "profile.invalid-value"
        what = f"{issue.where(exc.file)}: {issue.path or '(top)'}: {issue.message}"
        fix = exc.fix if issue is exc.issues[0] else ProfileInvalid(exc.file, [issue]).fix
        out.append(Finding(rule_id, "error", what, exc.why, fix, field=issue.path))
    return out


def _info(found: CheckpointInfo | Unresolved | None) -> CheckpointInfo | None:
    return found if isinstance(found, CheckpointInfo) else None
