"""Every failure of a Kubernetes API call, connection or kubeconfig as what/why/fix (DeployError,
exit 6), each answer as a user needs it (the answers are those of a real 1.36 kube-apiserver, "the
recording": ../shared/referees/kube-apiserver/README.md):

- a typed-patch 500 is a client error: the installed CRD (or the cluster's built-in schema) is
  older than what specdeploy renders, so the fix is to upgrade it, naming the release;
- a 422 `Invalid` lists each cause with the profile field that rendered it;
- 429/503/504 and connection resets are retried by the client (`client.Retrying`); when they
  persist past the request budget the error says how often it tried.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

import yaml

from orchestrator.deploy.kube.kubeconfig import kubeconfig_path
from orchestrator.errors import DeployError

#: How to get a missing custom resource API, per kind.
MISSING_API_FIX: Final[dict[str, str]] = {
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


#: The release of each platform whose CRDs specdeploy renders for (the sources are in the
#: emitters: orchestrator/emitters/kserve.py, orchestrator/emitters/kaito.py,
#: orchestrator/emitters/traffic.py, orchestrator/emitters/llmd.py,
#: orchestrator/emitters/dynamo.py and orchestrator/manifests/commands.py), for the fix of a
#: CRD older than what specdeploy sends.
CRD_RELEASE: Final[dict[str, str]] = {
    "LeaderWorkerSet": "LeaderWorkerSet v0.7.0 or later (kubernetes-sigs/lws)",
    "LLMInferenceService": "KServe v0.20.0 or later",
    "InferenceService": "KServe v0.20.0 or later",
    "LLMInferenceServiceConfig": "KServe v0.20.0 or later",
    "Workspace": "Kaito v0.12.0 or later",
    "InferenceSet": "Kaito v0.12.0 or later",
    "HTTPRoute": "Gateway API v1.6.1 or later (standard channel)",
    "Gateway": "Gateway API v1.6.1 or later (standard channel)",
    "InferencePool": "Gateway API Inference Extension v1.0 or later (inference.networking.k8s.io/v1)",
    "DynamoGraphDeployment": "Dynamo v1.5.0 or later",
}

#: Object paths as the API server names them in a 422's `details.causes[].field`, and the profile
#: field that renders each (first match wins; a kind of "*" matches any kind). Paths are matched
#: from the start, list indices as `[0]`; e.g. the recording's
#: `spec.parentRefs[0].namespace: Too long: may not be more than 63 bytes` on an HTTPRoute.
FIELD_SOURCES: Final[tuple[tuple[str, str, str], ...]] = (
    (
        "HTTPRoute",
        r"spec\.parentRefs\[\d+\]\.namespace",
        "deploy.gateway (its namespace part) or policy.gateway.namespace",
    ),
    ("HTTPRoute", r"spec\.parentRefs\[\d+\]\.sectionName", "policy.gateway.section_name"),
    ("HTTPRoute", r"spec\.parentRefs", "deploy.gateway or policy.gateway.name"),
    (
        "HTTPRoute",
        r"spec\.rules\[\d+\]\.backendRefs\[\d+\]\.weight",
        "deploy.baseline_traffic_percent",
    ),
    ("*", r"metadata\.namespace", "metadata.namespace (or --namespace)"),
    ("*", r"metadata\.(name|labels|generateName)", "metadata.name"),
    ("*", r"(.*\.)?(initContainers|containers)\[\d+\]\.image", "engine.image"),
    ("*", r"(.*\.)?containers\[\d+\]\.(args|command)", "serving.extra_args"),
    (
        "*",
        r"(.*\.)?containers\[\d+\]\.(ports|readinessProbe|livenessProbe|startupProbe)",
        "serving.port",
    ),
    (
        "*",
        r"(.*\.)?containers\[\d+\]\.resources",
        "hardware.gpu, hardware.tensor_parallel_size or hardware.gpus_per_node",
    ),
    ("*", r"(.*\.)?(nodeSelector|affinity|tolerations)", "hardware.gpu (its node label)"),
    (
        "*",
        r"(.*\.)?(secretName|secretKeyRef|secretRef|modelAccessSecret)",
        "deploy.hf_token_secret",
    ),
    ("*", r"(.*\.)?storageClassName", "deploy.model_cache.storage_class"),
    ("*", r"(.*\.)?(accessModes)", "deploy.model_cache.access_mode"),
    ("*", r"spec\.resources\.requests", "deploy.model_cache.size"),
    ("*", r"spec\.replicas", "deploy.replicas"),
    (
        "LeaderWorkerSet",
        r"spec\.leaderWorkerTemplate\.size",
        "hardware.tensor_parallel_size, hardware.pipeline_parallel_size or hardware.gpus_per_node",
    ),
    ("*", r"spec\.ports", "serving.port"),
)


@dataclass(frozen=True)
class Subject:
    """The object a request is about, so an error can name its kind and CRD."""

    kind: str
    api_version: str
    plural: str = ""

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def crd(self) -> str | None:
        """`<plural>.<group>` of a custom resource; None for a built-in kind."""
        if "." not in self.group:
            return None
        return f"{self.plural or self.kind.lower() + 's'}.{self.group}"


def profile_field(kind: str, path: str) -> str | None:
    """The profile field that renders `path` of an object of `kind`, if the table knows it."""
    path = path.lstrip(".")
    for table_kind, pattern, source in FIELD_SOURCES:
        if table_kind in ("*", kind) and re.match(pattern, path):
            return source
    return None


def cluster_error(
    what: str,
    exc: Exception,
    *,
    kubeconfig: bool = False,
    subject: Subject | None = None,
    attempts: int = 1,
) -> DeployError:
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
    if status == 500 and detail.startswith(TYPED_PATCH):
        return _typed_patch(what, detail, subject)
    if status == 422 and _status_causes(exc):
        return _invalid(what, exc, detail, subject)
    if status in TRANSIENT_STATUS:
        tries = f"{attempts} attempt{'s' if attempts != 1 else ''}"
        return DeployError(
            f"cannot {what}: the API server is busy or unavailable (HTTP {status})",
            why=f"{detail or str(exc).splitlines()[0]}; still so after {tries} within the "
            "request timeout",
            fix="wait and run the command again, or give it longer with --request-timeout; "
            "`kubectl get --raw /readyz?verbose` shows the API server's health",
        )
    if status is not None:
        return DeployError(
            f"the cluster refused to {what} (HTTP {status})",
            why=detail or str(exc),
            fix="fix what the API server names above; `specdeploy apply --server-dry-run` "
            "checks again without changing anything",
        )
    if attempts > 1:
        return DeployError(
            f"cannot {what}: the connection to the API server failed "
            f"{attempts} times ({type(exc).__name__})",
            why=detail or (str(exc).splitlines() or ["the connection was reset"])[0],
            fix="check that the API server is up and stays up (a restart or a proxy in between "
            "resets connections); `kubectl get --raw /readyz` tests the same connection",
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


#: How the API server's message of a typed-patch 500 begins: a client error answered as a 500
#: (https://github.com/kubernetes/kubernetes/issues/139253,
#: https://github.com/kubernetes/kubernetes/pull/139255).
TYPED_PATCH: Final = "failed to create typed patch object"
_TYPED_PATCH: Final = re.compile(
    r"failed to create typed patch object \((?P<where>[^;]*); (?P<gvk>[^)]*)\): (?P<detail>.*)",
    re.DOTALL,
)
#: Answers worth retrying: the API server's rate limit (429, with Retry-After), and an API server
#: or proxy that is overloaded or restarting (503, 504).
TRANSIENT_STATUS: Final = frozenset({429, 503, 504})


def _typed_patch(what: str, detail: str, subject: Subject | None) -> DeployError:
    """A typed-patch 500: the schema the API server has for the kind lacks a field specdeploy
    sends, or types it otherwise. No profile field can fix it and retrying cannot help."""
    found = _TYPED_PATCH.match(detail)
    gvk = found.group("gvk") if found else ""
    problem = (found.group("detail") if found else detail).strip()
    kind = subject.kind if subject else gvk.rpartition("Kind=")[2] or "the object"
    crd = subject.crd if subject else None
    if subject is None and "." in gvk.split("/")[0]:
        crd = f"the {kind} CRD ({gvk.split('/')[0]})"
    why = (
        f"the API server cannot build the typed patch: {problem} (HTTP 500, answered for a "
        "request no retry can fix: kubernetes/kubernetes#139253)"
    )
    if crd is not None:
        release = CRD_RELEASE.get(kind, f"the {kind} platform's release specdeploy renders for")
        return DeployError(
            f"cannot {what}: the installed CRD {crd} is older than what specdeploy renders",
            why=why,
            fix=f"upgrade the CRD {crd} to {release}; `kubectl get crd {crd} -o yaml` shows "
            "the installed one",
        )
    return DeployError(
        f"cannot {what}: the cluster's {kind} schema lacks what specdeploy renders",
        why=why,
        fix="upgrade the cluster to a Kubernetes release that serves these fields (specdeploy "
        "renders for the 1.36 API); on a current cluster this is a specdeploy bug, please "
        "report it with the message above",
    )


def _invalid(what: str, exc: Exception, detail: str, subject: Subject | None) -> DeployError:
    """A 422 Invalid: each cause with the profile field that rendered it."""
    kind = subject.kind if subject else ""
    lines, fields = [], []
    for cause in _status_causes(exc):
        path = str(cause.get("field") or "")
        source = profile_field(kind, path) if path else None
        message = str(cause.get("message") or cause.get("reason") or "")
        lines.append(f"{path or '(object)'}: {message}" + (f" (from {source})" if source else ""))
        if source and source not in fields:
            fields.append(source)
    return DeployError(
        f"the cluster refused to {what} (HTTP 422): {len(lines)} invalid field(s)",
        why="\n".join(lines) or detail,
        fix=(
            f"change {' and '.join(fields)} in the profile"
            if fields
            else "change the profile field that renders the fields above"
        )
        + "; `specdeploy apply --server-dry-run` checks again without changing anything",
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


def partial(exc: DeployError, done: list[str], total: int, dry_run: bool) -> DeployError:
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


def missing_api(server: str, api_version: str, kind: str) -> DeployError:
    """The cluster does not serve `kind`: a custom resource to install, or another cluster."""
    custom = "." in api_version.split("/")[0]
    return DeployError(
        f"the cluster at {server} has no {kind} API ({api_version})",
        why=f"{kind} is a custom resource that must be installed before it is applied"
        if custom
        else f"the API server does not serve {api_version}",
        fix=MISSING_API_FIX.get(
            kind,
            "install the platform that defines it (its CRDs), or render another --platform",
        )
        if custom
        else "check the cluster version and the kube context",
    )
