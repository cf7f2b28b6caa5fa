"""Dry-run deploy target: write the engine launch, engine config files and manifests to a directory.

Everything is rendered in memory first and written only when complete, so a failing render
writes nothing. The output is deterministic (sorted keys, no timestamps).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from orchestrator.emitters.base import emitter_for
from orchestrator.engines.base import EngineLaunch
from orchestrator.errors import OrchestratorError
from orchestrator.plan.types import DeploymentPlan


def render_files(
    plan: DeploymentPlan,
    *,
    platform: str = "kubernetes",
    options: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Relative path -> content for everything `render` writes (DESIGN.md §4): the launches,
    then the platform's objects."""
    files = _launch_files(plan.launch, "")
    baseline = plan.baseline_launch
    if baseline is not None:
        files.update(_launch_files(baseline, "baseline/"))
    files.update(emitter_for(platform, options).files(plan))
    return files


def write_files(files: dict[str, str], out_dir: Path) -> list[Path]:
    """Write rendered files under out_dir; returns the paths written, in order."""
    written = []
    try:
        for relative, content in sorted(files.items()):
            path = out_dir / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8")
            written.append(path)
    except OSError as exc:
        raise OrchestratorError(
            f"cannot write the render to {out_dir}: {exc.strerror or exc}",
            why="render writes launch.json, engine config files and manifests there",
            fix="pass --out a directory you can write to",
        ) from None
    return written


def _launch_files(launch: EngineLaunch, prefix: str) -> dict[str, str]:
    files = {f"{prefix}launch.json": json.dumps(launch.as_json(), indent=2, sort_keys=True) + "\n"}
    for name, content in launch.config_files.items():
        files[f"{prefix}{name}"] = content
    return files
