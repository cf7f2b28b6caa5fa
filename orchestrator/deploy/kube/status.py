"""Rollout state of one profile's workloads and pods, and why a pod is not ready (scheduling,
image pull, OOM, crash logs), in what/why/fix form."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Final

from orchestrator.deploy.kube.client import KubeClient
from orchestrator.emitters.base import ResourceKind
from orchestrator.errors import DeployError
from orchestrator.profile.schema import Profile

LOG_TAIL_LINES: Final = 20


@dataclass(frozen=True)
class Cause:
    """Why a pod is not ready, in what/why/fix form, with the last log lines when they help."""

    reason: str
    message: str
    fix: str
    log_tail: tuple[str, ...] = ()


@dataclass(frozen=True)
class PodStatus:
    name: str
    phase: str
    ready: bool
    causes: tuple[Cause, ...] = ()


@dataclass(frozen=True)
class ReadyCondition:
    """A custom resource's readiness as its platform reports it (a status condition)."""

    type: str
    status: str
    """"True", "False", or "Unknown" (also when the controller has not reported it yet)."""
    reason: str = ""
    message: str = ""
    means: str = ""
    """What the condition covers on this platform."""


@dataclass(frozen=True)
class WorkloadStatus:
    kind: str
    name: str
    replicas: int
    ready_replicas: int
    condition: ReadyCondition | None = None
    """Set for custom resources, whose controller reports readiness as a condition."""
    no_controller: Cause | None = None
    """Set when the workload's controller seems absent: no status, no Pods and no Event."""

    @property
    def ready(self) -> bool:
        if self.condition is not None:
            return self.condition.status == "True"
        return self.ready_replicas >= self.replicas

    def line(self) -> str:
        if self.condition is None:
            return f"{self.kind}/{self.name}: {self.ready_replicas}/{self.replicas} ready"
        c = self.condition
        detail = ": ".join(part for part in (c.reason, c.message) if part)
        return f"{self.kind}/{self.name}: {c.type}={c.status}" + (f" ({detail})" if detail else "")


@dataclass(frozen=True)
class StatusReport:
    """Rollout state of one profile's workloads and pods."""

    namespace: str
    workloads: tuple[WorkloadStatus, ...]
    pods: tuple[PodStatus, ...] = field(default=())

    @property
    def ready(self) -> bool:
        return bool(self.workloads) and all(w.ready for w in self.workloads)

    def lines(self) -> list[str]:
        """Human-readable report, one line per workload and pod, causes indented below."""
        out = []
        for w in self.workloads:
            out.append(w.line())
            if w.condition is not None and not w.ready and w.condition.means:
                out.append(f"  {w.condition.type} means: {w.condition.means}")
            if w.no_controller is not None:
                out.append(f"  {w.no_controller.reason}: {w.no_controller.message}")
                out.append(f"    fix: {w.no_controller.fix}")
        if not self.workloads:
            out.append(f"no workloads of this profile in namespace {self.namespace}")
        for pod in self.pods:
            out.append(f"  pod/{pod.name}: {pod.phase}{' (ready)' if pod.ready else ''}")
            for cause in pod.causes:
                out.append(f"    {cause.reason}: {cause.message}")
                out.append(f"      fix: {cause.fix}")
                out += [f"      | {line}" for line in cause.log_tail]
        return out


def status(client: KubeClient, profile: Profile, namespace: str | None = None) -> StatusReport:
    """Workload readiness and, for each pod that is not ready, why (conditions and events)."""
    namespace = profile.metadata.namespace or namespace or client.namespace
    selector = client.selector(profile)
    listed = client.list_items("v1", "Pod", namespace, selector)
    workloads = []
    for kind in (k for k in client.kinds if k.workload):
        for item in client.list_items(
            kind.api_version, kind.kind, namespace, selector, optional=True
        ):
            workload = _workload_status(kind, item)
            if _controller_silent(kind, item, listed):
                events = _events(client, workload.name, namespace)
                if not events:
                    workload = replace(workload, no_controller=_no_controller(kind.kind))
            workloads.append(workload)
    pods = [_pod_status(client, pod, namespace) for pod in listed]
    return StatusReport(namespace, tuple(workloads), tuple(pods))


def wait(
    client: KubeClient,
    profile: Profile,
    *,
    timeout: float,
    echo: Callable[[str], None],
    interval: float = 5.0,
    namespace: str | None = None,
) -> StatusReport:
    """Poll until every workload is ready, echoing progress; DeployError on timeout."""
    deadline = time.monotonic() + timeout
    last = ""
    while True:
        report = status(client, profile, namespace)
        progress = "; ".join(w.line() for w in report.workloads) or report.lines()[0]
        if progress != last:
            echo(f"waiting: {progress}")
            last = progress
        if report.ready:
            return report
        if time.monotonic() >= deadline:
            raise DeployError(
                f"{profile.metadata.name} is not ready after {timeout:.0f} s",
                why="\n".join(report.lines()),
                fix="act on the causes above, then `specdeploy status PROFILE`; model "
                "downloads can take long, so a longer --timeout may be all it needs",
            )
        time.sleep(interval)


#: Which controller runs a custom workload kind, to name in the fix when it seems absent.
CONTROLLERS: Final[dict[str, str]] = {
    "LeaderWorkerSet": "the LeaderWorkerSet controller (kubernetes-sigs/lws; installing its CRD "
    "alone is not enough): `kubectl get deploy -A -l control-plane=controller-manager` shows "
    "whether it runs; or fit TP x PP on one node (hardware.gpus_per_node) to get a Deployment",
    "LLMInferenceService": "the KServe controller (v0.20 or later)",
    "InferenceService": "the KServe controller",
    "Workspace": "the Kaito workspace controller",
    "DynamoGraphDeployment": "the Dynamo operator",
}


def _controller_silent(
    kind: ResourceKind, item: dict[str, Any], pods: list[dict[str, Any]]
) -> bool:
    """A custom workload nobody acts on: no status at all and no Pod of it (the recording: without
    an LWS controller a LeaderWorkerSet is stored and never gets Pods, and no Event says why).
    Built-in kinds are left out: the controller-manager runs their controllers."""
    if "." not in kind.api_version.split("/")[0] or item.get("status"):
        return False
    name = item["metadata"]["name"]
    return not any(
        name in ((pod.get("metadata") or {}).get("labels") or {}).values()
        or any(
            o.get("name") == name for o in (pod.get("metadata") or {}).get("ownerReferences") or []
        )
        for pod in pods
    )


def _no_controller(kind: str) -> Cause:
    controller = CONTROLLERS.get(kind, f"the controller of {kind}")
    return Cause(
        "NoController",
        f"{kind} has no status, no Pods and no Event: {controller.split(' (')[0].split(':')[0]} "
        "seems absent (if it was applied a moment ago, its controller may not have acted yet)",
        f"install {controller}",
    )


def _pod_status(client: KubeClient, pod: dict[str, Any], namespace: str) -> PodStatus:
    name = pod["metadata"]["name"]
    status = pod.get("status") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    causes: list[Cause] = [] if ready else _causes(client, pod, namespace)
    return PodStatus(name, str(status.get("phase", "Unknown")), ready, tuple(causes))


def _causes(client: KubeClient, pod: dict[str, Any], namespace: str) -> list[Cause]:
    name = pod["metadata"]["name"]
    causes = scheduling_causes(pod, _events(client, name, namespace))
    for container in (pod.get("status") or {}).get("containerStatuses") or []:
        cause = container_cause(container)
        if cause is None:
            continue
        if cause.reason in ("CrashLoopBackOff", "OOMKilled", "Error"):
            tail = _log_tail(client, name, namespace, str(container.get("name")))
            cause = Cause(cause.reason, cause.message, cause.fix, tail)
        causes.append(cause)
    return causes


def _events(client: KubeClient, pod_name: str, namespace: str) -> list[dict[str, Any]]:
    field_selector = f"involvedObject.name={pod_name}"
    return client.list_items("v1", "Event", namespace, None, field_selector=field_selector)


def _log_tail(client: KubeClient, pod: str, namespace: str, container: str) -> tuple[str, ...]:
    for previous in (True, False):  # the crashed run first, else the current one
        try:
            text = client.core.read_namespaced_pod_log(
                pod,
                namespace,
                container=container,
                previous=previous,
                tail_lines=LOG_TAIL_LINES,
                _request_timeout=client.timeout,
            )
        except client.exceptions:
            continue
        if text:
            return tuple(str(text).splitlines()[-LOG_TAIL_LINES:])
    return ()


def scheduling_causes(pod: dict[str, Any], events: list[dict[str, Any]]) -> list[Cause]:
    """An unschedulable pod: the scheduler's message (from the condition, else the events)."""
    messages = [
        str(c.get("message", ""))
        for c in (pod.get("status") or {}).get("conditions") or []
        if c.get("type") == "PodScheduled" and c.get("status") == "False"
    ]
    messages += [str(e.get("message", "")) for e in events if e.get("reason") == "FailedScheduling"]
    if not messages:
        return []
    message = messages[-1]
    if "Insufficient nvidia.com/gpu" in message or "Insufficient amd.com/gpu" in message:
        fix = (
            "free GPUs or add GPU nodes; or lower deploy.replicas, hardware.tensor_parallel_size "
            "or deploy.baseline; check that nodes carry the hardware.gpu node label"
        )
        return [Cause("InsufficientGPU", message, fix)]
    fix = "check node selectors, taints and free resources (kubectl describe nodes)"
    return [Cause("Unschedulable", message, fix)]


#: Container states that explain a pod that is not ready, with the profile edit that fixes them.
_WAITING_FIXES: Final[dict[str, str]] = {
    "ErrImagePull": "check engine.image (name and tag) and that nodes can pull from its registry",
    "ImagePullBackOff": "check engine.image (name and tag) and that nodes can pull from its registry",
    "InvalidImageName": "fix engine.image: it is not a valid image reference",
    "CrashLoopBackOff": "read the log lines below; a wrong flag in serving.extra_args, a model "
    "that does not fit (lower serving.max_model_len) or a missing hf_token_secret are common",
    "CreateContainerConfigError": "check deploy.hf_token_secret: the Secret or its HF_TOKEN key "
    "may be missing",
}


def container_cause(container: dict[str, Any]) -> Cause | None:
    """A waiting or last-terminated state that explains why a container is not ready."""
    state = container.get("state") or {}
    last = (container.get("lastState") or {}).get("terminated") or {}
    if last.get("reason") == "OOMKilled" or (state.get("terminated") or {}).get("reason") == (
        "OOMKilled"
    ):
        return Cause(
            "OOMKilled",
            f"container {container.get('name')} ran out of memory (exit code "
            f"{last.get('exitCode', (state.get('terminated') or {}).get('exitCode'))})",
            "raise the pod's memory limit or lower serving.max_model_len / max_concurrency",
        )
    waiting = state.get("waiting") or {}
    reason = waiting.get("reason")
    if reason in _WAITING_FIXES:
        message = str(waiting.get("message") or reason)
        return Cause(str(reason), message, _WAITING_FIXES[str(reason)])
    return None


def _workload_status(kind: ResourceKind, item: dict[str, Any]) -> WorkloadStatus:
    spec, status = item.get("spec") or {}, item.get("status") or {}
    replicas = int(spec.get("replicas", 1) or 0)
    ready = int(status.get("readyReplicas") or 0)
    name = item["metadata"]["name"]
    if kind.ready_condition is None:
        return WorkloadStatus(kind.kind, name, replicas, ready)
    found = next(
        (c for c in status.get("conditions") or [] if c.get("type") == kind.ready_condition),
        None,
    )
    condition = ReadyCondition(
        kind.ready_condition,
        str((found or {}).get("status", "Unknown")),
        str((found or {}).get("reason", "" if found else "not reported by its controller yet")),
        str((found or {}).get("message", "")),
        kind.ready_means,
    )
    return WorkloadStatus(kind.kind, name, replicas, ready, condition)
