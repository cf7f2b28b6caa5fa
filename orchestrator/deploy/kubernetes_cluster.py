"""Kubernetes cluster target: re-exports `orchestrator.deploy.kube`, where the code lives split by
what it does (client, errors, apply, status, delete)."""

from __future__ import annotations

from orchestrator.deploy.kube.apply import FIELD_MANAGER, Action, ApplyResult, object_diff, project
from orchestrator.deploy.kube.client import REQUEST_TIMEOUT_S, KubeClient
from orchestrator.deploy.kube.cluster import KubernetesCluster
from orchestrator.deploy.kube.errors import MISSING_API_FIX, cluster_error
from orchestrator.deploy.kube.kubeconfig import kubeconfig_path
from orchestrator.deploy.kube.status import (
    LOG_TAIL_LINES,
    Cause,
    PodStatus,
    ReadyCondition,
    StatusReport,
    WorkloadStatus,
    container_cause,
    scheduling_causes,
)

__all__ = [
    "FIELD_MANAGER",
    "LOG_TAIL_LINES",
    "MISSING_API_FIX",
    "REQUEST_TIMEOUT_S",
    "Action",
    "ApplyResult",
    "Cause",
    "KubeClient",
    "KubernetesCluster",
    "PodStatus",
    "ReadyCondition",
    "StatusReport",
    "WorkloadStatus",
    "cluster_error",
    "container_cause",
    "kubeconfig_path",
    "object_diff",
    "project",
    "scheduling_causes",
]
