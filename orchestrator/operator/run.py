"""Start the operator: check the cluster first (exit 6 with what/why/fix), then run kopf.

The API client comes from the pod's service account when running in a cluster, else from the
kubeconfig (`KUBECONFIG`, ~/.kube/config), as kubectl would. Before kopf starts, the operator
checks that the API server answers and serves the SpeculativeDeployment CRD: kopf itself would
retry forever, and a missing CRD deserves a message that says how to install it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from orchestrator.deploy.kubernetes_cluster import KubernetesCluster, cluster_error, kubeconfig_path
from orchestrator.errors import DeployError
from orchestrator.operator.crd import API_VERSION, KIND
from orchestrator.operator.leader import LEASE_NAME, Elector, KubeLeaseStore, Timing
from orchestrator.operator.metrics import LEADER, LEASE_RENEWAL_FAILURES, MetricsServer
from orchestrator.operator.objects import KINDS
from orchestrator.operator.source import InClusterCheckpoints

_SERVICE_ACCOUNT_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"


def run_operator(
    namespaces: tuple[str, ...],
    *,
    all_namespaces: bool,
    offline: bool,
    liveness: str | None,
    echo: Callable[[str], None],
    election: Election | None = None,
    metrics_bind: tuple[str, int] | None = None,
) -> None:
    """Run until interrupted (SIGINT/SIGTERM); DeployError when the cluster cannot be used or
    the Lease was lost. With `election`, kopf runs only while this replica holds the Lease.
    With `metrics_bind`, GET /metrics answers there from the start (a follower's too), and a
    port already taken is a UsageError before anything else happens."""
    server = None
    if metrics_bind is not None:
        server = MetricsServer(*metrics_bind)
        echo(f"metrics: {server.url}")
    try:
        _run(namespaces, all_namespaces, offline, liveness, echo, election)
    finally:
        LEADER.set(0)
        if server is not None:
            server.close()


def _run(
    namespaces: tuple[str, ...],
    all_namespaces: bool,
    offline: bool,
    liveness: str | None,
    echo: Callable[[str], None],
    election: Election | None,
) -> None:
    import kopf

    from orchestrator.operator.handlers import build_registry

    cluster = connect()
    preflight(cluster)
    served = () if all_namespaces else (namespaces or (cluster.namespace,))
    where = "every namespace" if all_namespaces else "namespace(s) " + ", ".join(served)
    echo(f"specdeploy operator: {API_VERSION} {KIND} in {where} at {cluster.server}")
    elector = None
    if election is not None:
        elector = campaign(cluster, election, echo)
        if elector is None:
            return  # stopped while a follower
    registry = build_registry(connect, InClusterCheckpoints(offline=offline))
    settings = kopf.OperatorSettings()
    stop = asyncio.Event()

    @kopf.on.cleanup(registry=registry)
    async def raise_the_stop_flag(**_: Any) -> None:
        """Stopped by a signal, kopf leaves the task that waits for our stop flag pending and
        waits 5 s for it before it exits (kopf/_core/reactor/running.py, run_tasks: the
        "stop-flag waiter"); raising the flag as it cleans up lets it exit at once."""
        stop.set()

    async def operate() -> None:
        operator = kopf.operator(
            registry=registry,
            settings=settings,
            standalone=True,
            clusterwide=all_namespaces,
            namespaces=list(served),
            liveness_endpoint=liveness,
            stop_flag=stop,
        )
        if elector is None:
            LEADER.set(1)
            await operator
            return
        await lead(operator, elector, stop, echo)

    try:
        asyncio.run(operate())
    except kopf.LoginError as exc:
        raise DeployError(
            f"the operator cannot log in to the cluster: {exc}",
            why="kopf found neither a service account nor a usable kubeconfig",
            fix=f"point KUBECONFIG at a valid kubeconfig (now {kubeconfig_path()})",
        ) from exc


@dataclass(frozen=True)
class Election:
    """Where the Lease is and how long it lasts; `identity` names this replica in it."""

    namespace: str | None
    """None: the operator pod's namespace (POD_NAMESPACE), else the kube context's."""
    identity: str
    timing: Timing


def campaign(
    cluster: KubernetesCluster, election: Election, echo: Callable[[str], None]
) -> Elector | None:
    """Wait until this replica holds the Lease; None when SIGTERM or Ctrl-C came first (a
    follower holds nothing, so it just stops)."""
    namespace = election.namespace or os.environ.get("POD_NAMESPACE") or cluster.namespace
    elector = Elector(
        KubeLeaseStore(cluster, namespace), election.identity, namespace, election.timing
    )
    echo(
        f"leader election: Lease {namespace}/{LEASE_NAME} as {election.identity} "
        f"(lease {election.timing.lease_s:g} s)"
    )
    stopped: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, _frame: stopped.append(signum))
    try:
        waiting_said = False
        while not stopped:
            if elector.try_acquire_or_renew():
                echo(f"leading: {election.identity} holds Lease {namespace}/{LEASE_NAME}")
                return elector
            if not waiting_said:
                echo(f"following: {elector.holder} leads; waiting for the Lease")
                waiting_said = True
            for _ in range(max(1, round(election.timing.retry_s / 0.1))):
                if stopped:
                    break
                time.sleep(0.1)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
    echo("stopped while following")
    return None


async def lead(
    operator: Coroutine[Any, Any, None],
    elector: Elector,
    stop: asyncio.Event,
    echo: Callable[[str], None],
) -> None:
    """Run kopf while the Lease is renewed; stop it once a renewal is `renew_deadline` late
    (before any follower may take over) and raise, so the process exits and campaigns again
    after a restart. A clean stop (SIGTERM) releases the Lease."""
    lost: list[str] = []
    LEADER.set(1)

    async def renew() -> None:
        while not stop.is_set():
            await asyncio.sleep(elector.timing.retry_s)
            try:
                await asyncio.to_thread(elector.try_acquire_or_renew)
            except DeployError as exc:
                LEASE_RENEWAL_FAILURES.inc()
                echo(f"leader election: renewing failed: {exc.what}")
            if not elector.leading:
                LEADER.set(0)
                lost.append(elector.holder or "nobody")
                echo(f"leader election: lost the Lease (now {lost[0]}); stopping")
                stop.set()

    renewing = asyncio.create_task(renew())
    try:
        await operator
    finally:
        renewing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await renewing
    if lost:
        raise DeployError(
            f"the operator lost its Lease {elector.namespace}/{LEASE_NAME} to {lost[0]}",
            why="another replica may act now, so this one stopped acting",
            fix="nothing: it exits so that its pod restarts and campaigns again; if this "
            "repeats, the API server is too slow to answer within the renew deadline",
        )
    LEADER.set(0)  # it stops acting before it lets go
    with contextlib.suppress(DeployError):
        if await asyncio.to_thread(elector.release):
            echo(f"leader election: released Lease {elector.namespace}/{LEASE_NAME}")


def connect() -> KubernetesCluster:
    """A cluster client: in-cluster credentials inside a pod, else the kubeconfig."""
    return KubernetesCluster(api_client=_in_cluster_client(), kinds=KINDS)


def preflight(cluster: KubernetesCluster) -> None:
    """The API answers and serves the CRD, or a DeployError that says how to install it."""
    try:
        cluster.require(API_VERSION, KIND)
    except DeployError as exc:
        if "has no" not in exc.what:
            raise
        raise DeployError(
            f"the cluster at {cluster.server} does not serve {KIND} ({API_VERSION})",
            why="the operator watches SpeculativeDeployment resources, whose CRD is not installed",
            fix="install the operator's chart (helm install specdeploy-operator "
            "charts/specdeploy-operator), or `specdeploy operator --print-crd | kubectl apply -f -`",
        ) from exc


def _in_cluster_client() -> Any:
    if not (os.environ.get("KUBERNETES_SERVICE_HOST") and os.path.exists(_SERVICE_ACCOUNT_TOKEN)):
        return None  # KubernetesCluster reads the kubeconfig
    from kubernetes import client, config

    try:
        configuration = client.Configuration()
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    except Exception as exc:
        raise cluster_error("load the in-cluster service account", exc, kubeconfig=True) from exc
    return client.ApiClient(configuration)
