"""What `apply` reports for an object it applied: created, configured or unchanged.

The race these cases pin was seen on CI: the Deployment controller wrote status between apply's
GET and its server-side apply, which moved resourceVersion, and an unchanged profile was
reported `configured`.
"""

from __future__ import annotations

import copy
from typing import Any

from orchestrator.deploy.kube.apply import _action


def deployment(version: str, replicas: int = 1, ready: int = 0) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "engine",
            "resourceVersion": version,
            "generation": 1,
            "managedFields": [{"manager": "specdeploy", "time": f"t{version}"}],
        },
        "spec": {"replicas": replicas},
        "status": {"readyReplicas": ready},
    }


def test_the_same_resource_version_is_unchanged() -> None:
    assert _action(deployment("7"), deployment("7"), "", dry_run=False) == "unchanged"


def test_a_status_write_in_between_is_not_our_change() -> None:
    before, after = deployment("7"), deployment("9", ready=1)
    after["metadata"]["managedFields"].append({"manager": "kube-controller-manager"})
    assert _action(before, after, "", dry_run=False) == "unchanged"


def test_a_changed_spec_is_configured() -> None:
    assert _action(deployment("7"), deployment("8", replicas=2), "", dry_run=False) == "configured"


def test_a_changed_label_is_configured() -> None:
    after = copy.deepcopy(deployment("8"))
    after["metadata"]["labels"] = {"specdeploy.io/profile": "new"}
    assert _action(deployment("7"), after, "", dry_run=False) == "configured"


def test_a_dry_run_follows_the_diff_and_a_new_object_is_created() -> None:
    assert _action(deployment("7"), deployment("7"), "- a\n+ b", dry_run=True) == "configured"
    assert _action(deployment("7"), deployment("7"), "", dry_run=True) == "unchanged"
    assert _action(None, deployment("1"), "", dry_run=False) == "created"
