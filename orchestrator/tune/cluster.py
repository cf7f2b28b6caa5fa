"""`tune --cluster`: each arm (the baseline, then the profile with each k) applied to the cluster
as its own deployment, one at a time as one GPU's worth of nodes holds them, measured through the
API server's service proxy, and deleted before the next is applied.

Each arm is named `<name>-tune-k<k>` / `<name>-tune-baseline` (`variants`), so the profile's own
deployment, if it runs, is never touched. An arm is measured once every workload of it is ready
(`KubernetesCluster.wait`, which says why a pod is not); its objects are deleted when its cells are
done, when it never gets ready, and on Ctrl-C or SIGTERM. The requests and /metrics reads go to
`{server}/api/v1/namespaces/{ns}/services/{arm}:http/proxy` with the kubeconfig's credentials
(`orchestrator.deploy.kube.proxy`): nothing but the API server needs to be reachable, and the
user needs `services/proxy` besides what `apply` needs. The proxy adds a hop to every request,
the same for both arms of a cell, so speedups compare like with like; absolute TTFTs include it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

from orchestrator.deploy.kube.proxy import proxied_service
from orchestrator.deploy.kubernetes_cluster import KubernetesCluster
from orchestrator.emitters.kubernetes import manifests_for
from orchestrator.errors import DeployError
from orchestrator.plan.types import DeploymentPlan
from orchestrator.tune.run import Serve, Served
from orchestrator.tune.variants import variant_plans

#: The Service port tune reaches each arm on (templates/kubernetes/service.yaml.j2 names it).
SERVICE_PORT = "http"


def cluster_engines(
    path: Path,
    plan: DeploymentPlan,
    ks: tuple[int, ...],
    cluster: KubernetesCluster,
    namespace: str,
    *,
    timeout: float,
    echo: Callable[[str], None],
    offline: bool,
) -> Serve:
    """What serves each k (0: the baseline) on `cluster`, in `namespace`, one arm at a time."""
    plans = variant_plans(
        path, plan, ks, offline=offline, how="tune --cluster", named=True, baseline=True
    )

    @contextlib.contextmanager
    def serve(k: int) -> Iterator[Served]:
        arm = plans[k]
        manifests = manifests_for(arm)
        services = [m for m in manifests if m.kind == "Service"]
        if not services:  # the kubernetes emitter always renders one: a bug if not
            raise DeployError(
                f"{arm.profile.metadata.name}: no Service was rendered",
                why="tune --cluster reaches each arm through its Service",
                fix="report this: the kubernetes emitter renders a Service for every profile",
            )
        name = arm.profile.metadata.name
        try:
            for result in cluster.apply_each(manifests):
                echo(f"{result.kind.lower()}/{result.name} {result.action} in {namespace}")
            try:
                cluster.wait(arm.profile, timeout=timeout, echo=echo, namespace=namespace)
            except DeployError as exc:
                raise DeployError(
                    exc.what,
                    why=exc.why,
                    fix="act on the causes above (the arm's objects are deleted; `specdeploy "
                    "apply` of the profile with that k shows them live); pulling the image and "
                    "the weights counts, so a longer --engine-timeout may be all it needs. The "
                    "cells measured so far are kept: run tune again with the same --out",
                ) from None
            echo(f"{name} is ready; measuring it through the API server's service proxy")
            service = proxied_service(cluster, namespace, services[0].name, SERVICE_PORT)
            yield Served(service.url, service.token, service.tls)
        finally:
            deleted = cluster.delete(arm.profile, namespace)
            echo(
                f"{name}: deleted {', '.join(f'{k.lower()}/{n}' for k, n in deleted) or 'nothing'}"
            )

    return serve
