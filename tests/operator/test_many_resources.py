"""Many resources at once (issue 21): each resource's control loop waits between intervals
without holding a thread, so a dozen resources (twice kopf's default thread pool on two CPUs)
are all planned promptly. A real operator process against the loopback API server."""

from __future__ import annotations

import pytest

from tests.operator.conftest import CR, Operator, resource, status_of, wait_for
from tests.operator.fake_api import FakeCluster

pytestmark = pytest.mark.slow

COUNT = 12


def test_a_dozen_resources_are_all_planned(api: FakeCluster, operator: Operator) -> None:
    names = [f"tenant-{i:02d}" for i in range(COUNT)]
    for name in names:
        body = resource(policy={"mode": "static", "interval_seconds": 30})
        body["metadata"] = {"name": name}
        api.put(*CR, body)

    def planned() -> list[str]:
        return [n for n in names if status_of(api, n).get("verdict")]

    wait_for(f"all {COUNT} resources planned", lambda: len(planned()) == COUNT, operator, 90)
    deployments = api.list("apis/apps/v1", "deployments")
    assert len(deployments) == 2 * COUNT  # both twins of each
