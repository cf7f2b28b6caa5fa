"""Which engines and releases support a proposer method for a target: the `engine.method-supported`
rule run against every release of the capability matrix (`capabilities.yaml`)."""

from __future__ import annotations

from orchestrator.checkpoint.info import CheckpointInfo
from orchestrator.compatibility.engine_rules import engine_supports_method
from orchestrator.compatibility.rule import CompatContext
from orchestrator.engines.capabilities import known_versions, parse_version, release_for
from orchestrator.engines.names import ENGINE_NAMES, EngineName
from orchestrator.profile.schema import Profile


def newest_release(engine: EngineName) -> str:
    """The newest release the capability matrix knows for `engine`."""
    return max(known_versions(engine), key=parse_version)


def supported_releases(
    profile: Profile, target: CheckpointInfo | None
) -> tuple[tuple[EngineName, str], ...]:
    """(engine, "≥ first release") for every engine whose known releases support the profile's
    method for this target from some release on; "a, b" when support is not continuous."""
    out = []
    for engine in ENGINE_NAMES:
        versions = sorted(known_versions(engine), key=parse_version)
        ok = [v for v in versions if _supports(profile, target, engine, v)]
        if not ok:
            continue
        continuous = versions[versions.index(ok[0]) :] == ok
        out.append((engine, f">={ok[0]}" if continuous else ", ".join(ok)))
    return tuple(out)


def describe_support(support: tuple[tuple[EngineName, str], ...]) -> str:
    return ", ".join(f"{engine} {versions}" for engine, versions in support) or "none known"


def _supports(
    profile: Profile, target: CheckpointInfo | None, engine: EngineName, version: str
) -> bool:
    release = release_for(engine, version)
    probe = profile.model_copy(
        update={"engine": profile.engine.model_copy(update={"name": engine, "version": version})}
    )
    return not engine_supports_method(CompatContext(probe, release, target))
