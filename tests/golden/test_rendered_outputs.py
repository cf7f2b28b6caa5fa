"""Every example profile renders exactly as its golden files say (argv one token per line, engine
config files and manifests as canonical YAML/JSON). Review golden diffs like code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from orchestrator.deploy.dry_run_files import render_files
from orchestrator.plan.build import load_and_plan
from orchestrator.plan.types import DeploymentPlan
from tests.support import PROFILES_DIR, Golden

PROFILES = sorted(PROFILES_DIR.glob("*.yaml"))


def canonical(relpath: str, content: str) -> str:
    """Canonical text of a rendered file, so formatting changes don't touch goldens."""
    if relpath.endswith(".json"):
        return json.dumps(json.loads(content), indent=2, sort_keys=True) + "\n"
    if relpath.endswith((".yaml", ".yml")):
        return "---\n".join(yaml.safe_dump(d, sort_keys=True) for d in yaml.safe_load_all(content))
    return content


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.stem)
def test_rendered_plan_matches_golden(profile: Path, golden: Golden) -> None:
    plan = load_and_plan(profile, offline=True)
    assert isinstance(plan, DeploymentPlan), [f.what for f in plan.errors]
    files = render_files(plan)
    for relpath, content in sorted(files.items()):
        if relpath.endswith("launch.json"):
            argv = json.loads(content)["argv"]
            golden.check(
                f"{profile.stem}/{relpath.removesuffix('launch.json')}argv.txt",
                "\n".join(argv) + "\n",
            )
        golden.check(f"{profile.stem}/{relpath}", canonical(relpath, content))
