"""Kubernetes cluster target: server-side apply, status with causes, delete by profile labels.

Uses the `kubernetes` client, imported only inside `KubernetesCluster.__init__` so that commands
that never talk to a cluster do not pay for it. Every object is applied with field manager
`specdeploy` in the platform emitter's apply order, and reported as it lands; re-applying an
unchanged profile leaves every object as it was. Fields another manager owns are not taken over
unless asked (`force_conflicts`). Every request has a deadline and no retries, so an API server
that accepts connections and never answers fails within the request timeout. Cluster failures
become DeployError (exit 6) with what, why and fix.
"""

from __future__ import annotations

import difflib
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

import yaml

from orchestrator.emitters.base import (
    EMITTERS,
    Manifest,
    ResourceKind,
    canonical_yaml,
    sort_for_apply,
)
from orchestrator.errors import DeployError
from orchestrator.manifests.context import profile_selector
from orchestrator.profile.schema import Profile

FIELD_MANAGER: Final = "specdeploy"
LOG_TAIL_LINES: Final = 20
#: Seconds each API request may take (connect and each read) before the call fails.
REQUEST_TIMEOUT_S: Final = 30.0

Action = Literal["created", "configured", "unchanged"]


@dataclass(frozen=True)
class ApplyResult:
    """What server-side apply did (or, with server dry run, would do) to one object."""

    kind: str
    name: str
    namespace: str
    action: Action
    diff: str = ""


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
        if not self.workloads:
            out.append(f"no workloads of this profile in namespace {self.namespace}")
        for pod in self.pods:
            out.append(f"  pod/{pod.name}: {pod.phase}{' (ready)' if pod.ready else ''}")
            for cause in pod.causes:
                out.append(f"    {cause.reason}: {cause.message}")
                out.append(f"      fix: {cause.fix}")
                out += [f"      | {line}" for line in cause.log_tail]
        return out


class KubernetesCluster:
    """One cluster context and default namespace; all calls go through `_calling`."""

    def __init__(
        self,
        *,
        context: str | None = None,
        namespace: str | None = None,
        api_client: Any = None,
        kinds: tuple[ResourceKind, ...] | None = None,
        request_timeout: float = REQUEST_TIMEOUT_S,
    ) -> None:
        from kubernetes import client, config, dynamic  # the one allowed deferred import

        self._exceptions = _exception_types()
        self.kinds = kinds if kinds is not None else EMITTERS["kubernetes"].kinds
        self._timeout = request_timeout
        if api_client is None:
            with self._calling("load the kubeconfig", kubeconfig=True):
                api_client = config.new_client_from_config(  # type: ignore[no-untyped-call]
                    config_file=kubeconfig_path(), context=context
                )
        self.server = str(api_client.configuration.host)
        _bound(api_client, request_timeout)
        self.namespace = namespace or _context_namespace(config, context) or "default"
        with self._calling(f"reach the API server at {self.server}"):
            self._cache_dir = tempfile.TemporaryDirectory(prefix="specdeploy-discovery-")
            cache_file = str(Path(self._cache_dir.name) / "discovery.json")
            self._dynamic = dynamic.DynamicClient(api_client, cache_file=cache_file)  # type: ignore[no-untyped-call]
            self._core = client.CoreV1Api(api_client)

    # -- apply -------------------------------------------------------------------------------

    def apply(
        self,
        manifests: list[Manifest],
        *,
        server_dry_run: bool = False,
        force_conflicts: bool = False,
    ) -> list[ApplyResult]:
        """Server-side apply in apply order; with server_dry_run the server validates only."""
        return list(
            self.apply_each(
                manifests, server_dry_run=server_dry_run, force_conflicts=force_conflicts
            )
        )

    def apply_each(
        self,
        manifests: list[Manifest],
        *,
        server_dry_run: bool = False,
        force_conflicts: bool = False,
    ) -> Iterator[ApplyResult]:
        """Apply one object at a time, yielding each result as it lands. When one fails, the
        DeployError names the objects already applied (they stay in the cluster)."""
        ordered = sort_for_apply(manifests, self.kinds)
        done: list[str] = []
        for manifest in ordered:
            try:
                result = self._apply_one(
                    manifest, server_dry_run=server_dry_run, force_conflicts=force_conflicts
                )
            except DeployError as exc:
                raise _partial(exc, done, len(ordered), server_dry_run) from exc.__cause__
            done.append(f"{result.kind.lower()}/{result.name}")
            yield result

    def _apply_one(
        self, manifest: Manifest, *, server_dry_run: bool, force_conflicts: bool
    ) -> ApplyResult:
        namespace = manifest.namespace or self.namespace
        body = {**manifest.body, "metadata": {**manifest.body["metadata"], "namespace": namespace}}
        target = f"{manifest.kind}/{manifest.name} in namespace {namespace}"
        resource = self._resource(manifest.api_version, manifest.kind)
        with self._calling(f"apply {target}"):
            current = self._get(resource, manifest.name, namespace)
            applied = resource.server_side_apply(
                body=body,
                name=manifest.name,
                namespace=namespace,
                field_manager=FIELD_MANAGER,
                force_conflicts=True if force_conflicts else None,
                dry_run="All" if server_dry_run else None,
                _request_timeout=self._timeout,
            ).to_dict()
        diff = object_diff(current, body, manifest.filename)
        action = _action(current, applied, diff, dry_run=server_dry_run)
        return ApplyResult(manifest.kind, manifest.name, namespace, action, diff)

    # -- status ------------------------------------------------------------------------------

    def status(self, profile: Profile, namespace: str | None = None) -> StatusReport:
        """Workload readiness and, for each pod that is not ready, why (conditions and events)."""
        namespace = profile.metadata.namespace or namespace or self.namespace
        selector = _selector(profile)
        workloads = []
        for kind in (k for k in self.kinds if k.workload):
            for item in self._list(kind.api_version, kind.kind, namespace, selector, optional=True):
                workloads.append(_workload_status(kind, item))
        pods = [
            self._pod_status(pod, namespace) for pod in self._list("v1", "Pod", namespace, selector)
        ]
        return StatusReport(namespace, tuple(workloads), tuple(pods))

    def wait(
        self,
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
            report = self.status(profile, namespace)
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

    def _pod_status(self, pod: dict[str, Any], namespace: str) -> PodStatus:
        name = pod["metadata"]["name"]
        status = pod.get("status") or {}
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or []
        )
        causes: list[Cause] = [] if ready else self._causes(pod, namespace)
        return PodStatus(name, str(status.get("phase", "Unknown")), ready, tuple(causes))

    def _causes(self, pod: dict[str, Any], namespace: str) -> list[Cause]:
        name = pod["metadata"]["name"]
        causes = scheduling_causes(pod, self._events(name, namespace))
        for container in (pod.get("status") or {}).get("containerStatuses") or []:
            cause = container_cause(container)
            if cause is None:
                continue
            if cause.reason in ("CrashLoopBackOff", "OOMKilled", "Error"):
                tail = self._log_tail(name, namespace, str(container.get("name")))
                cause = Cause(cause.reason, cause.message, cause.fix, tail)
            causes.append(cause)
        return causes

    def _events(self, pod_name: str, namespace: str) -> list[dict[str, Any]]:
        field_selector = f"involvedObject.name={pod_name}"
        return self._list("v1", "Event", namespace, None, field_selector=field_selector)

    def _log_tail(self, pod: str, namespace: str, container: str) -> tuple[str, ...]:
        for previous in (True, False):  # the crashed run first, else the current one
            try:
                text = self._core.read_namespaced_pod_log(
                    pod,
                    namespace,
                    container=container,
                    previous=previous,
                    tail_lines=LOG_TAIL_LINES,
                    _request_timeout=self._timeout,
                )
            except self._exceptions:
                continue
            if text:
                return tuple(str(text).splitlines()[-LOG_TAIL_LINES:])
        return ()

    # -- delete ------------------------------------------------------------------------------

    def delete(self, profile: Profile, namespace: str | None = None) -> list[tuple[str, str]]:
        """Delete only objects labelled for this profile, in reverse apply order."""
        namespace = profile.metadata.namespace or namespace or self.namespace
        selector = _selector(profile)
        deleted: list[tuple[str, str]] = []
        for managed in reversed(self.kinds):
            kind = managed.kind
            items = self._list(managed.api_version, kind, namespace, selector, optional=True)
            if not items:
                continue
            resource = self._resource(managed.api_version, kind)
            for item in items:
                name = item["metadata"]["name"]
                with self._calling(f"delete {kind}/{name} in namespace {namespace}"):
                    resource.delete(name=name, namespace=namespace, _request_timeout=self._timeout)
                deleted.append((kind, name))
        return deleted

    # -- reading and status (the operator) -----------------------------------------------------

    def require(self, api_version: str, kind: str) -> None:
        """DeployError when the cluster does not serve this kind."""
        self._resource(api_version, kind)

    def live(self, manifest: Manifest) -> dict[str, Any] | None:
        """The object as the cluster has it now, or None."""
        namespace = manifest.namespace or self.namespace
        resource = self._resource(manifest.api_version, manifest.kind)
        with self._calling(f"read {manifest.kind}/{manifest.name} in namespace {namespace}"):
            return self._get(resource, manifest.name, namespace)

    def list_objects(
        self, api_version: str, kind: str, namespace: str, labels: dict[str, str]
    ) -> list[dict[str, Any]]:
        """Objects of one kind carrying all `labels`."""
        selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
        return self._list(api_version, kind, namespace, selector, optional=True)

    def patch_status(
        self, api_version: str, kind: str, name: str, namespace: str, status: dict[str, Any]
    ) -> None:
        """Merge-patch an object's status subresource."""
        resource = self._resource(api_version, kind)
        with self._calling(f"update the status of {kind}/{name} in namespace {namespace}"):
            resource.status.patch(
                body={"status": status},
                name=name,
                namespace=namespace,
                content_type="application/merge-patch+json",
                _request_timeout=self._timeout,
            )

    # -- helpers -----------------------------------------------------------------------------

    def _resource(self, api_version: str, kind: str) -> Any:
        from kubernetes.dynamic.exceptions import ResourceNotFoundError

        try:
            with self._calling(f"discover {kind} ({api_version})"):
                return self._dynamic.resources.get(api_version=api_version, kind=kind)
        except DeployError as exc:
            if not isinstance(exc.__cause__, ResourceNotFoundError):
                raise
            raise DeployError(
                f"the cluster at {self.server} has no {kind} API ({api_version})",
                why=f"{kind} is a custom resource that must be installed before it is applied"
                if "." in api_version.split("/")[0]
                else f"the API server does not serve {api_version}",
                fix=_MISSING_API_FIX.get(
                    kind,
                    "install the platform that defines it (its CRDs), or render another --platform",
                )
                if "." in api_version.split("/")[0]
                else "check the cluster version and the kube context",
            ) from exc.__cause__

    def _get(self, resource: Any, name: str, namespace: str) -> dict[str, Any] | None:
        from kubernetes.dynamic.exceptions import NotFoundError

        try:
            found = resource.get(name=name, namespace=namespace, _request_timeout=self._timeout)
            return dict(found.to_dict())
        except NotFoundError:
            return None

    def _list(
        self,
        api_version: str,
        kind: str,
        namespace: str,
        selector: str | None,
        *,
        field_selector: str | None = None,
        optional: bool = False,
    ) -> list[dict[str, Any]]:
        try:
            resource = self._resource(api_version, kind)
        except DeployError:
            if optional:  # e.g. no LeaderWorkerSet CRD: nothing of that kind can exist
                return []
            raise
        with self._calling(f"list {kind} in namespace {namespace}"):
            listing = resource.get(
                namespace=namespace,
                label_selector=selector,
                field_selector=field_selector,
                _request_timeout=self._timeout,
            ).to_dict()
        return list(listing.get("items") or [])

    @contextmanager
    def _calling(self, what: str, *, kubeconfig: bool = False) -> Iterator[None]:
        try:
            yield
        except DeployError:
            raise
        except Exception as exc:
            raise cluster_error(what, exc, kubeconfig=kubeconfig) from exc


def object_diff(current: dict[str, Any] | None, body: dict[str, Any], name: str) -> str:
    """Unified diff of the fields specdeploy sets: the live values (projected onto the applied
    body's fields, so server defaults and status do not show) against the applied body."""
    before = "" if current is None else canonical_yaml(project(current, body))
    after = canonical_yaml(body)
    lines = difflib.unified_diff(
        before.splitlines(True), after.splitlines(True), f"live/{name}", f"applied/{name}"
    )
    return "".join(lines)


def project(live: Any, shape: Any) -> Any:
    """The parts of `live` at the paths `shape` has (lists compared element by element)."""
    if isinstance(shape, dict) and isinstance(live, dict):
        return {k: project(live[k], v) for k, v in shape.items() if k in live}
    if isinstance(shape, list) and isinstance(live, list):
        return [project(lv, sv) for lv, sv in zip(live, shape, strict=False)] + live[len(shape) :]
    return live


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


#: How to get a missing custom resource API, per kind.
_MISSING_API_FIX: Final[dict[str, str]] = {
    "LeaderWorkerSet": "install LeaderWorkerSet (kubernetes-sigs/lws), or fit TP x PP on one node "
    "(hardware.gpus_per_node) to get a Deployment",
    "LLMInferenceService": "install KServe (v0.20 or later) with its LLMInferenceService CRDs",
    "InferenceService": "install KServe and its kserve-vllmserver ClusterServingRuntime",
    "Workspace": "install the Kaito workspace controller (kaito.sh CRDs)",
    "DynamoGraphDeployment": "install the Dynamo platform (its operator and nvidia.com CRDs)",
    "InferencePool": "install the Gateway API Inference Extension CRDs",
    "HTTPRoute": "install the Gateway API CRDs (standard channel), or remove "
    "deploy.baseline_traffic_percent",
}

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


def cluster_error(what: str, exc: Exception, *, kubeconfig: bool = False) -> DeployError:
    """An API, connection or kubeconfig failure as what/why/fix."""
    status = getattr(exc, "status", None)
    detail = _api_message(exc)
    if kubeconfig:
        return DeployError(
            f"cannot {what}: {type(exc).__name__}",
            why=(str(exc).splitlines() or ["the kubeconfig could not be read"])[0],
            fix=f"point KUBECONFIG at a valid kubeconfig (now {kubeconfig_path()}), or pass "
            "--context with a context it defines",
        )
    if status == 409:
        return _conflict(what, exc)
    if status in (401, 403):
        return DeployError(
            f"the cluster refused to {what} (HTTP {status})",
            why=detail or "the credentials of this kube context lack the permission",
            fix="use a context allowed to manage Deployments, Services and ConfigMaps there "
            "(--context), or ask for an RBAC role",
        )
    if status is not None:
        return DeployError(
            f"the cluster refused to {what} (HTTP {status})",
            why=detail or str(exc),
            fix="fix what the API server names above; `specdeploy apply --server-dry-run` "
            "checks again without changing anything",
        )
    if _timed_out(exc):
        return DeployError(
            f"cannot {what}: the API server did not answer in time",
            why=f"no answer within the request timeout ({type(exc).__name__})",
            fix="check that the cluster is up and reachable from here (VPN, proxy, firewall); "
            "`kubectl get --raw /version` tests the same connection",
        )
    return DeployError(
        f"cannot {what}: {type(exc).__name__}",
        why=detail or (str(exc).splitlines() or ["no answer from the API server"])[0],
        fix="check that the cluster is reachable and the kube context (--context, KUBECONFIG) "
        "points at it",
    )


def _conflict(what: str, exc: Exception) -> DeployError:
    """A server-side apply conflict: fields specdeploy sets that another manager owns."""
    causes = _status_causes(exc)
    fields = [str(c.get("field", "")) for c in causes if c.get("field")]
    managers = sorted({m for c in causes for m in _MANAGER.findall(str(c.get("message", "")))})
    who = ", ".join(f'"{m}"' for m in managers) or "another field manager"
    return DeployError(
        f"cannot {what}: {len(fields) or 'some'} field(s) specdeploy sets are owned by {who}"
        + (f": {', '.join(fields)}" if fields else ""),
        why=f"server-side apply does not take fields from another manager ({who}) without "
        "being told to; someone changed these fields by hand or with another tool",
        fix="re-run with --force-conflicts to take the fields over for specdeploy (the "
        "profile's values win), or remove the other manager's change "
        "(`kubectl get -o yaml --show-managed-fields` shows who owns what)",
    )


#: `conflict with "kubectl-edit" using apps/v1` in a FieldManagerConflict cause's message.
_MANAGER: Final = re.compile(r'conflict with "([^"]+)"')


def _status_causes(exc: Exception) -> list[dict[str, Any]]:
    body = getattr(exc, "body", None)
    try:
        document = yaml.safe_load(body) if body else None
    except yaml.YAMLError:
        return []
    if not isinstance(document, dict):
        return []
    details = document.get("details")
    causes = details.get("causes") if isinstance(details, dict) else None
    return [c for c in causes if isinstance(c, dict)] if isinstance(causes, list) else []


def _timed_out(exc: Exception) -> bool:
    """A connect or read timeout, however urllib3 wrapped it."""
    seen: BaseException | None = exc
    for _ in range(4):
        if seen is None:
            return False
        if isinstance(seen, TimeoutError) or "Timeout" in type(seen).__name__:
            return True
        reason = getattr(seen, "reason", None)  # urllib3 wraps; ApiException's is a string
        seen = (
            (reason if isinstance(reason, BaseException) else None)
            or seen.__cause__
            or seen.__context__
        )
    return False


def _partial(exc: DeployError, done: list[str], total: int, dry_run: bool) -> DeployError:
    """The failure of one object, saying which objects before it are already in the cluster."""
    if not done or dry_run:
        return exc
    return DeployError(
        exc.what,
        why=f"{exc.why}\n{len(done)} of {total} objects were applied before this one and are "
        f"in the cluster now: {', '.join(done)}",
        fix=f"{exc.fix}; then apply again (unchanged objects are left as they are), or "
        "`specdeploy delete PROFILE` to remove what was applied",
    )


def _bound(api_client: Any, timeout: float) -> None:
    """Give every request of this client a deadline (connect and each read) and no retries: the
    client's own default waits forever on an API server that accepts and never answers, and
    retries a failed connection three times."""
    import urllib3

    rest = api_client.rest_client
    rest.pool_manager.connection_pool_kw["retries"] = urllib3.Retry(total=0, redirect=False)
    send = rest.request

    def request(*args: Any, _request_timeout: Any = None, **kwargs: Any) -> Any:
        return send(*args, _request_timeout=_request_timeout or (timeout, timeout), **kwargs)

    rest.request = request


def _api_message(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    if not body:
        return ""
    try:
        document = yaml.safe_load(body)
    except yaml.YAMLError:
        return str(body)[:500]
    if isinstance(document, dict):
        return str(document.get("message", ""))
    return str(body)[:500]


def _action(
    current: dict[str, Any] | None, applied: dict[str, Any], diff: str, *, dry_run: bool
) -> Action:
    """A real apply that changes nothing keeps the resourceVersion; a dry run persists nothing,
    so there the diff decides."""
    if current is None:
        return "created"
    if dry_run:
        return "configured" if diff else "unchanged"
    before = (current.get("metadata") or {}).get("resourceVersion")
    after = (applied.get("metadata") or {}).get("resourceVersion")
    return "unchanged" if before == after else "configured"


def _selector(profile: Profile) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(profile_selector(profile).items()))


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


def kubeconfig_path() -> str:
    """KUBECONFIG as it is now (the client reads it once, at import), else ~/.kube/config."""
    return os.environ.get("KUBECONFIG") or str(Path("~/.kube/config").expanduser())


def _context_namespace(config: Any, context: str | None) -> str | None:
    try:
        contexts, active = config.list_kube_config_contexts(config_file=kubeconfig_path())
    except Exception:
        return None
    chosen = next((c for c in contexts if c.get("name") == context), active) if context else active
    namespace = (chosen or {}).get("context", {}).get("namespace")
    return None if namespace is None else str(namespace)


def _exception_types() -> tuple[type[BaseException], ...]:
    from kubernetes.client.exceptions import ApiException

    return (ApiException, OSError)
