"""Plans for manifest tests: real profiles through planning, with rule errors ignored.

The manifest stage needs a valid plan; whether a hub model resolves offline, or a shape fits the
memory budget, is other rules' business, so `valid_plan` plans again ignoring the rules that
refused it. Stage findings (engine.multi-node) cannot be ignored: those must still plan.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from orchestrator.plan.build import load_and_plan
from orchestrator.plan.types import DeploymentPlan
from tests.support import write_profile

HERE = Path(__file__).parent
#: Kubernetes releases the manifests must validate against: the oldest supported and the newest
#: kubernetes-validate ships.
K8S_VERSIONS = ("1.30.0", kubernetes_validate.latest_version())

MakePlan = Callable[..., DeploymentPlan]


def valid_plan(path: Path) -> DeploymentPlan:
    plan = load_and_plan(path, offline=True)
    if not isinstance(plan, DeploymentPlan):
        ignore = frozenset(f.rule for f in plan.errors)
        plan = load_and_plan(path, offline=True, ignore=ignore)
    assert isinstance(plan, DeploymentPlan), [f.what for f in plan.findings]
    return plan


@pytest.fixture
def make_plan(tmp_path: Path) -> MakePlan:
    """A valid plan for BASE_PROFILE (tests.support) with sections replaced."""

    def make(**sections: Any) -> DeploymentPlan:
        return valid_plan(write_profile(tmp_path, **sections))

    return make


def validate_object(body: dict[str, Any]) -> None:
    """kubernetes-validate (strict) for built-in kinds; the vendored LWS schema plus strict
    validation of its pod templates (wrapped in a Deployment) for LeaderWorkerSet; the Gateway
    API referee for HTTPRoute."""
    if body["kind"] == "LeaderWorkerSet":
        _validate_lws(body)
        return
    if body["apiVersion"].startswith("gateway.networking.k8s.io/"):
        # kubernetes-validate has no Gateway API kinds: the emitters' committed referee
        # (tests/unit/emitters/referees.py) judges them as the API server would
        from tests.unit.emitters.referees import crd_errors

        assert crd_errors(body) == [], body
        return
    for version in K8S_VERSIONS:
        kubernetes_validate.validate(body, version, strict=True)


def _validate_lws(body: dict[str, Any]) -> None:
    import jsonschema

    schema = json.loads((HERE / "lws_v1_schema.json").read_text())
    jsonschema.validate(body, schema)
    group = body["spec"]["leaderWorkerTemplate"]
    for key in ("leaderTemplate", "workerTemplate"):
        template = group[key]
        shell = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "lws-pod-template-check"},
            "spec": {
                "selector": {"matchLabels": template["metadata"]["labels"]},
                "template": template,
            },
        }
        for version in K8S_VERSIONS:
            kubernetes_validate.validate(shell, version, strict=True)
