"""Two operator replicas as the chart's ServiceAccount, with the chart's Roles (the watched
namespace's and the Lease's): exactly one acts (issue 21 §8). On the imitation in the default run
(its authorizer decides each Lease request as the recorded 1.36 server does, by verb), on a real
cluster with SPECDEPLOY_E2E_KUBECONFIG.

- the first replica takes the Lease and plans the resource; the second follows and does nothing;
- SIGTERM to the leader: it releases the Lease and exits 0, and the follower leads at its next try,
  well inside a lease duration, and plans a resource created after;
- a leader killed outright (no release): the follower takes over only once the lease has run out
  as it observed it, and not before.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest

from orchestrator.operator.leader import LEASE_NAME
from tests.e2e.kubernetes.operator_process import OperatorProcess, create_resource, resource
from tests.kube.cluster import Cluster

pytestmark = pytest.mark.slow

LEASE_S = 4.0
#: The operator's log line for its Applied Event (--debug logs Normal Events too, at INFO).
APPLIED = ": Applied: applied"


def _replica(name: str, kubeconfig: Path, namespace: str, tmp_path: Path) -> OperatorProcess:
    """One replica as the chart runs it with leader election (its POD_NAME is its identity)."""
    return OperatorProcess(
        kubeconfig, namespace, tmp_path / f"{name}.log",
        "--leader-elect", "--lease-seconds", str(LEASE_S),
        env={"POD_NAME": name, "POD_NAMESPACE": namespace}, debug=True,
    )  # fmt: skip


def _planned(kube: Cluster, namespace: str, name: str) -> Any:
    found = resource(kube, namespace, name)
    return found is not None and (found.get("status") or {}).get("verdict")


def _holder(kube: Cluster, namespace: str) -> Any:
    lease = kube.get("coordination.k8s.io/v1", "Lease", LEASE_NAME, namespace)
    return lease is not None and (lease.get("spec") or {}).get("holderIdentity")


def test_two_replicas_one_acts_and_the_lease_hands_over(
    kube: Cluster, kube_namespace: str, tmp_path: Path
) -> None:
    kubeconfig = kube.chart_identity(kube_namespace)
    replicas: list[OperatorProcess] = []
    try:
        a = _replica("replica-a", kubeconfig, kube_namespace, tmp_path)
        replicas.append(a)
        kube.wait_for("replica-a to lead", lambda: a.says("leading: replica-a"), 60)
        b = _replica("replica-b", kubeconfig, kube_namespace, tmp_path)
        replicas.append(b)
        kube.wait_for("replica-b to follow", lambda: b.says("following: replica-a leads"), 60)

        create_resource(kube, kube_namespace, "first", interval_s=None)
        kube.wait_for("the leader to plan it", lambda: _planned(kube, kube_namespace, "first"), 90)
        assert APPLIED in a.output()
        assert APPLIED not in b.output(), b.output()[-2000:]  # the follower did nothing

        # a clean stop releases the Lease: the follower leads at its next try
        assert a.stop() == 0, a.output()[-3000:]
        exited_at = time.monotonic()
        assert a.says("released Lease")
        kube.wait_for("replica-b to lead", lambda: b.says("leading: replica-b"), 30)
        handover = time.monotonic() - exited_at
        assert handover < LEASE_S, f"{handover:.1f} s: as if the Lease had not been released"
        assert _holder(kube, kube_namespace) == "replica-b"
        create_resource(kube, kube_namespace, "second", interval_s=None)
        kube.wait_for(
            "the new leader to plan it", lambda: _planned(kube, kube_namespace, "second"), 90
        )

        # a leader killed outright does not release: the other waits the lease out
        c = _replica("replica-c", kubeconfig, kube_namespace, tmp_path)
        replicas.append(c)
        kube.wait_for("replica-c to follow", lambda: c.says("following: replica-b leads"), 60)
        b.stop(signal.SIGKILL)
        killed_at = time.monotonic()
        kube.wait_for("replica-c to lead", lambda: c.says("leading: replica-c"), 60)
        takeover = time.monotonic() - killed_at
        assert takeover >= LEASE_S * 0.5, (
            f"took over after {takeover:.1f} s: before the lease ran out"
        )
        print(f"handover after a release: {handover:.1f} s; after a kill: {takeover:.1f} s")
    finally:
        for replica in replicas:
            replica.stop()
