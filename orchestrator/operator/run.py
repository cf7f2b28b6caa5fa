"""Start the operator: check the cluster first (exit 6 with what/why/fix), then run kopf.

The API client comes from the pod's service account when running in a cluster, else from the
kubeconfig (`KUBECONFIG`, ~/.kube/config), as kubectl would. Before kopf starts, the operator
checks that the API server answers and serves the SpeculativeDeployment CRD: kopf itself would
retry forever, and a missing CRD deserves a message that says how to install it.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any

from orchestrator.deploy.kubernetes_cluster import KubernetesCluster, cluster_error, kubeconfig_path
from orchestrator.errors import DeployError
from orchestrator.operator.crd import API_VERSION, KIND
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
) -> None:
    """Run until interrupted (SIGINT/SIGTERM); DeployError when the cluster cannot be used."""
    import kopf

    from orchestrator.operator.handlers import build_registry

    cluster = connect()
    preflight(cluster)
    served = () if all_namespaces else (namespaces or (cluster.namespace,))
    where = "every namespace" if all_namespaces else "namespace(s) " + ", ".join(served)
    echo(f"specdeploy operator: {API_VERSION} {KIND} in {where} at {cluster.server}")
    registry = build_registry(connect, InClusterCheckpoints(offline=offline))
    settings = kopf.OperatorSettings()
    try:
        asyncio.run(
            kopf.operator(
                registry=registry,
                settings=settings,
                standalone=True,
                clusterwide=all_namespaces,
                namespaces=list(served),
                liveness_endpoint=liveness,
            )
        )
    except kopf.LoginError as exc:
        raise DeployError(
            f"the operator cannot log in to the cluster: {exc}",
            why="kopf found neither a service account nor a usable kubeconfig",
            fix=f"point KUBECONFIG at a valid kubeconfig (now {kubeconfig_path()})",
        ) from exc


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
