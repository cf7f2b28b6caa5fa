"""The Kubernetes API imitation: one HTTP server on loopback that the real `kubernetes` client,
kopf and kubectl talk to, answering as the kube-apiserver of the 1.36 line answered when it was
recorded (../shared/referees/kube-apiserver/README.md; each behaviour below names its section).

No real control plane can run on this machine (no kube-apiserver binary, no Go module proxy), so
this is an imitation: built from the recorded answers and from the API server's code at the
commits cited in each module. It serves:

* discovery (/version, /api, /apis, each group version) for the built-in kinds in `BUILTIN` and
  for every CustomResourceDefinition stored in it: installing a CRD (a real
  `apiextensions.k8s.io/v1` object) serves its kinds, with its `openAPIV3Schema` as their schema;
* GET, LIST (label and field selectors), WATCH (chunked JSON lines, resumable from a
  resourceVersion), POST, PUT, PATCH (apply, merge, JSON and strategic merge patches), DELETE and
  DELETE of a collection, with dry runs; the `status`, `log` and `token` subresources;
* server-side apply with field ownership, conflicts and managedFields (`tests.kube.fields`), the
  typed-patch 500s, 422 Invalid causes and pruning (`tests.kube.schema`), built-in checks and
  defaults (`tests.kube.builtin`), RBAC (`tests.kube.rbac`), and the controllers
  (`tests.kube.controllers`: garbage collection, namespaces, Deployments, ReplicaSets, the
  scheduler, a kubelet). Each comment names the recording it follows.

What it does not do: CEL rules (counted, not evaluated: `unchecked_cel`), admission webhooks,
conversion webhooks (every served version of a CRD is the same object), pagination, protobuf.
"""

from __future__ import annotations

import bisect
import copy
import itertools
import json
import logging
import re
import secrets
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import jsonpatch
import yaml
from werkzeug import Request, Response
from werkzeug.serving import make_server

from tests.kube import builtin, fields
from tests.kube.rbac import (
    ANONYMOUS,
    PUBLIC_PATHS,
    Attributes,
    Authorizer,
    Decision,
    User,
    forbidden_status,
    service_account_user,
)
from tests.kube.schema import (
    CEL_SKIPPED,
    FieldError,
    Schema,
    cel_rules,
    prune,
    pruned_paths,
    typed_errors,
    value_errors,
)

GIT_VERSION = "v1.36.0"
ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class Resource:
    """One served resource (a plural of a group), built in or defined by a CRD."""

    group: str
    versions: tuple[str, ...]
    plural: str
    kind: str
    namespaced: bool
    subresources: tuple[str, ...] = ()
    singular: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    crd: str = ""
    """The CustomResourceDefinition's name; "" for a built-in kind."""
    verbs: tuple[str, ...] = ALL_VERBS

    def api_version(self, version: str) -> str:
        return f"{self.group}/{version}" if self.group else version

    @property
    def qualified(self) -> str:
        """`deployments.apps`, `services`: how Status messages name the resource."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def builtin(self) -> bool:
        return not self.crd


def _r(
    group: str, plural: str, kind: str, namespaced: bool = True, *subs: str, **kw: Any
) -> Resource:
    return Resource(group, ("v1",), plural, kind, namespaced, tuple(subs), kind.lower(), **kw)


BUILTIN: tuple[Resource, ...] = (
    _r("", "namespaces", "Namespace", False, "status", short_names=("ns",)),
    _r("", "nodes", "Node", False, "status", short_names=("no",)),
    _r("", "pods", "Pod", True, "status", "log", short_names=("po",)),
    _r("", "services", "Service", True, "status", short_names=("svc",)),
    _r("", "configmaps", "ConfigMap", short_names=("cm",)),
    _r("", "secrets", "Secret"),
    _r("", "events", "Event", short_names=("ev",)),
    _r("", "serviceaccounts", "ServiceAccount", True, "token", short_names=("sa",)),
    _r("", "persistentvolumeclaims", "PersistentVolumeClaim", True, "status", short_names=("pvc",)),
    _r("apps", "deployments", "Deployment", True, "status", short_names=("deploy",)),
    _r("apps", "replicasets", "ReplicaSet", True, "status", short_names=("rs",)),
    # leader election's Lease (served since 1.14; client-go's leaderelection writes it by PUT)
    _r("coordination.k8s.io", "leases", "Lease"),
    _r("rbac.authorization.k8s.io", "roles", "Role"),
    _r("rbac.authorization.k8s.io", "rolebindings", "RoleBinding"),
    _r("rbac.authorization.k8s.io", "clusterroles", "ClusterRole", False),
    _r("rbac.authorization.k8s.io", "clusterrolebindings", "ClusterRoleBinding", False),
    _r("apiextensions.k8s.io", "customresourcedefinitions", "CustomResourceDefinition", False,
       "status", short_names=("crd", "crds")),
    _r("authorization.k8s.io", "selfsubjectaccessreviews", "SelfSubjectAccessReview", False,
       verbs=("create",)),
)  # fmt: skip
#: Kinds whose metadata.generation counts spec changes (the others carry none).
_GENERATION_KINDS = frozenset({"Deployment", "ReplicaSet", "Pod", "CustomResourceDefinition"})

Key = tuple[str, str, str, str]
"""(group, plural, namespace, name); the namespace is "" for a cluster-scoped object."""

_RESOURCE_PATH = re.compile(
    r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/(?P<version>[^/]+))"
    r"(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[^/]+)(?:/(?P<name>[^/]+))?(?:/(?P<sub>[^/]+))?$"
)


@dataclass
class Logged:
    """One request the imitation answered."""

    method: str
    path: str
    """With the query string."""
    user_agent: str
    user: str
    status: int = 0


class Failure(Exception):
    """A request the API server refuses: its HTTP status and Status body."""

    def __init__(self, code: int, body: dict[str, Any]) -> None:
        super().__init__(body.get("message", ""))
        self.code, self.body = code, body


def status_body(
    code: int, reason: str, message: str, details: dict[str, Any] | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
    }
    if reason:
        body["reason"] = reason
    if details is not None:
        body["details"] = details
    body["code"] = code
    return body


def fail(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> Failure:
    return Failure(code, status_body(code, reason, message, details))


def invalid_failure(kind: str, group: str, name: str, errors: list[FieldError]) -> Failure:
    """422 Invalid as errors.NewInvalid writes it: one error bare, several in brackets."""
    qualified = f"{kind}.{group}" if group else kind
    messages = list(dict.fromkeys(e.message for e in errors))
    joined = messages[0] if len(messages) == 1 else "[" + ", ".join(messages) + "]"
    causes = [{"reason": e.type, "message": e.body, "field": e.field} for e in errors]
    return fail(
        422,
        "Invalid",
        f'{qualified} "{name}" is invalid: {joined}',
        {"name": name, "group": group, "kind": kind, "causes": causes},
    )


class Imitation:
    """The API server's state and its answers; `serve()` puts it on loopback."""

    def __init__(
        self,
        *,
        gc_delay: float = 0.3,
        controllers: tuple[str, ...] = (
            "gc",
            "namespace",
            "deployment",
            "replicaset",
            "scheduler",
            "kubelet",
        ),
        kubelet_delay: float = 0.2,
        nodes: tuple[dict[str, Any], ...] | None = None,
    ) -> None:
        """`nodes`: Node objects (controllers.node_body); by default one worker without GPUs, as
        a kind cluster has."""
        from tests.kube.controllers import Controllers

        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self._objects: dict[Key, dict[str, Any]] = {}
        self._rbac: dict[str, dict[Key, dict[str, Any]]] = {}
        """Roles, bindings and their cluster kinds by plural: what the authorizer reads."""
        self._version = 1000
        self._uids = itertools.count(1)
        self._ips = itertools.count(10)
        self.history: list[tuple[int, Key, str, dict[str, Any]]] = []
        self.requests: list[Logged] = []
        self.admin_token = "imitation-admin-" + secrets.token_hex(8)
        self._tokens: dict[str, User] = {
            self.admin_token: User("kubernetes-admin", ("system:masters", "system:authenticated"))
        }
        self.authorizer = Authorizer(self._of_kind)
        self.logs: dict[str, str] = {}
        """Pod name -> what `pods/<name>/log` returns (its container's output)."""
        self.unchecked_cel: list[tuple[str, str, int]] = []
        """(kind, name, CEL rules not evaluated) of each custom resource stored."""
        self.pruned: list[tuple[str, str, list[str]]] = []
        """(kind, name, paths) a structural schema pruned from a create or update."""
        self.faults: list[list[Any]] = []
        """[path fragment, HTTP status, times left]: answer that status instead (`inject`)."""
        self.stopping = False
        self._resources: dict[tuple[str, str], Resource] = {(r.group, r.plural): r for r in BUILTIN}
        self._schemas: dict[tuple[str, str, str], Schema | None] = {}
        self.controllers = Controllers(
            self, set(controllers), gc_delay=gc_delay, kubelet_delay=kubelet_delay
        )
        self._server: Any = None
        self.url = ""
        for name in ("default", "kube-system", "kube-public"):
            self.system_create(
                ("", "namespaces", "", name),
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
            )
        from tests.kube.controllers import node_body

        for node in nodes if nodes is not None else (node_body("worker"),):
            self.system_create(("", "nodes", "", node["metadata"]["name"]), node, "kubelet")

    # -- serving ------------------------------------------------------------------------------

    def serve(self) -> Imitation:
        """Listen on 127.0.0.1 (a free port) with a threaded server; start the controllers."""

        def app(environ: Any, start_response: Any) -> Any:
            return self.handle(Request(environ))(environ, start_response)

        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self._server = make_server("127.0.0.1", 0, app, threaded=True)
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self.controllers.start()
        return self

    def close(self) -> None:
        with self.changed:
            self.stopping = True
            self.changed.notify_all()
        self.controllers.stop()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    # -- identities -------------------------------------------------------------------------

    def token_for(self, user: User) -> str:
        token = "imitation-" + secrets.token_hex(12)
        self._tokens[token] = user
        return token

    def kubeconfig(self, token: str | None = None, namespace: str = "default") -> str:
        """A kubeconfig for this server: as the admin, or with `token`."""
        return kubeconfig_text(self.url, token or self.admin_token, namespace)

    def denied(self) -> list[Decision]:
        return [d for d in self.authorizer.log if not d.allowed]

    # -- the HTTP side ------------------------------------------------------------------------

    def handle(self, request: Request) -> Response:
        logged = Logged(
            request.method,
            request.full_path.rstrip("?"),
            request.headers.get("User-Agent", ""),
            "",
        )
        self.requests.append(logged)
        try:
            user = self._authenticate(request)
            logged.user = user.name
            response = self._dispatch(request, user)
        except Failure as failure:
            response = _json(failure.body, failure.code)
        logged.status = response.status_code
        return response

    def _authenticate(self, request: Request) -> User:
        header = request.headers.get("Authorization", "")
        if not header:
            return ANONYMOUS
        scheme, _, token = header.partition(" ")
        user = self._tokens.get(token.strip()) if scheme.lower() == "bearer" else None
        if user is None:
            raise fail(401, "Unauthorized", "Unauthorized")
        return user

    def _dispatch(self, request: Request, user: User) -> Response:
        for fault in self.faults:
            if fault[0] in request.path and fault[2] > 0:
                fault[2] -= 1
                code = int(fault[1])
                headers = {"Retry-After": "1"} if code == 429 else {}
                reason = {
                    429: "TooManyRequests",
                    503: "ServiceUnavailable",
                    500: "InternalError",
                }.get(code, "")
                return _json(
                    status_body(code, reason, f"injected by the test ({code})"), code, headers
                )
        path = request.path.rstrip("/") or "/"
        discovery = self._discovery(path, user)
        if discovery is not None:
            return _json(discovery)
        match = _RESOURCE_PATH.match(path)
        if match is None:
            raise fail(404, "NotFound", "the server could not find the requested resource")
        group = match["group"] or ""
        version = match["core"] or match["version"]
        namespace, plural, name, sub = match["ns"], match["plural"], match["name"], match["sub"]
        if namespace and plural in ("status", "finalize") and name is None and group == "":
            namespace, plural, name, sub = None, "namespaces", namespace, plural
        if plural == "namespaces" and group == "" and namespace is not None and name is None:
            pass
        resource = self._resource(group, plural, version)
        if resource.namespaced and namespace is None and name is not None:
            raise fail(404, "NotFound", "the server could not find the requested resource")
        if sub and sub not in resource.subresources:
            raise fail(404, "NotFound", "the server could not find the requested resource")
        return self._resource_request(
            request, user, resource, version, namespace or "", name or "", sub or ""
        )

    def _resource(self, group: str, plural: str, version: str) -> Resource:
        with self.lock:
            found = self._resources.get((group, plural))
        if found is None or version not in found.versions:
            raise fail(404, "NotFound", "the server could not find the requested resource")
        return found

    def _resource_request(
        self,
        request: Request,
        user: User,
        res: Resource,
        version: str,
        ns: str,
        name: str,
        sub: str,
    ) -> Response:
        method = request.method
        verb = {
            "GET": "get" if name else ("watch" if _truthy(request.args.get("watch")) else "list"),
            "POST": "create",
            "PUT": "update",
            "PATCH": "patch",
            "DELETE": "delete" if name else "deletecollection",
        }.get(method)
        if verb is None:
            raise fail(405, "MethodNotAllowed", f"{method} is not supported")
        if verb not in res.verbs and not sub:
            raise fail(
                405,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
            )
        if method == "POST" and sub == "token":
            verb = "create"
        attrs = Attributes(
            user, verb, res.group, res.plural, sub, ns if res.namespaced else "", name
        )
        if not self.authorizer.authorize(attrs).allowed:
            raise Failure(403, forbidden_status(attrs))
        if verb == "watch":
            return self._watch(request, res, version, ns)
        with self.lock:
            if verb == "list":
                return _json(self._list(request, res, version, ns))
            if verb == "get":
                if sub == "log":
                    self._get(res, version, ns, name)
                    return Response(self.logs.get(name, ""), content_type="text/plain")
                return _json(self._get(res, version, ns, name))
            if method == "POST" and sub == "token":
                return _json(self._token_request(res, ns, name), 201)
            if method == "POST" and res.kind == "SelfSubjectAccessReview":
                return _json(self._access_review(request, user), 201)
            if method == "POST":
                return self._create(request, user, res, version, ns)
            if method == "PUT":
                return self._put(request, user, res, version, ns, name, sub)
            if method == "PATCH":
                content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
                if content_type == "application/apply-patch+yaml":
                    return self._apply(request, user, res, version, ns, name, sub)
                return self._patch(request, user, res, version, ns, name, sub, content_type)
            if verb == "delete":
                return self._delete(request, res, version, ns, name)
            return self._delete_collection(request, res, version, ns)

    # -- discovery ----------------------------------------------------------------------------

    def _discovery(self, path: str, user: User) -> dict[str, Any] | None:
        discovery_paths = path in ("/api", "/apis") or path.startswith(
            ("/api/", "/apis/", "/openapi")
        )
        if path in PUBLIC_PATHS:
            if path == "/version":
                return {
                    "major": "1",
                    "minor": "36",
                    "gitVersion": GIT_VERSION,
                    "platform": "linux/amd64",
                }
            return None
        if not discovery_paths:
            return None
        parts = path.strip("/").split("/")
        is_discovery = path in ("/api", "/apis", "/api/v1") or (
            parts[0] == "apis" and len(parts) <= 3
        )
        if not is_discovery and not path.startswith("/openapi"):
            return None
        if user is ANONYMOUS:
            raise fail(
                403, "Forbidden", f'forbidden: User "system:anonymous" cannot get path "{path}"', {}
            )
        if path.startswith("/openapi"):
            raise fail(404, "NotFound", "the server could not find the requested resource")
        with self.lock:
            resources = list(self._resources.values())
        if path == "/api":
            return {
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [
                    {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}
                ],
            }
        if path == "/apis":
            groups: dict[str, list[str]] = {}
            for r in resources:
                if r.group:
                    for v in r.versions:
                        if v not in groups.setdefault(r.group, []):
                            groups[r.group].append(v)
            return {
                "kind": "APIGroupList",
                "apiVersion": "v1",
                "groups": [_group_entry(g, vs) for g, vs in sorted(groups.items())],
            }
        if path == "/api/v1":
            return _resource_list("v1", [r for r in resources if r.group == ""])
        if len(parts) == 2:
            versions = sorted({v for r in resources if r.group == parts[1] for v in r.versions})
            if not versions:
                raise fail(404, "NotFound", "the server could not find the requested resource")
            entry = _group_entry(parts[1], versions)
            return {"kind": "APIGroup", "apiVersion": "v1", **entry}
        group, version = parts[1], parts[2]
        served = [r for r in resources if r.group == group and version in r.versions]
        if not served:
            raise fail(404, "NotFound", "the server could not find the requested resource")
        return _resource_list(f"{group}/{version}", served)

    # -- reads --------------------------------------------------------------------------------

    def _get(self, res: Resource, version: str, ns: str, name: str) -> dict[str, Any]:
        obj = self._objects.get((res.group, res.plural, ns, name))
        if obj is None:
            raise fail(
                404,
                "NotFound",
                f'{res.qualified} "{name}" not found',
                {"name": name, "group": res.group, "kind": res.plural},
            )
        return self._served(obj, res, version)

    def _served(self, obj: dict[str, Any], res: Resource, version: str) -> dict[str, Any]:
        out = copy.deepcopy(obj)
        out["apiVersion"] = res.api_version(version)
        return out

    def _list(self, request: Request, res: Resource, version: str, ns: str) -> dict[str, Any]:
        labels = _label_selector(request.args.get("labelSelector"))
        field_sel = _field_selector(request.args.get("fieldSelector"))
        items = [
            self._served(obj, res, version)
            for key, obj in sorted(self._objects.items())
            if key[:2] == (res.group, res.plural)
            and (not ns or key[2] == ns)
            and labels(obj)
            and field_sel(obj)
        ]
        return {
            "kind": f"{res.kind}List",
            "apiVersion": res.api_version(version),
            "metadata": {"resourceVersion": str(self._version)},
            "items": items,
        }

    def _watch(self, request: Request, res: Resource, version: str, ns: str) -> Response:
        since = int(request.args.get("resourceVersion") or 0)
        timeout = min(float(request.args.get("timeoutSeconds") or 1800), 1800.0)
        labels = _label_selector(request.args.get("labelSelector"))
        field_sel = _field_selector(request.args.get("fieldSelector"))

        def matches(key: Key, obj: dict[str, Any]) -> bool:
            return (
                key[:2] == (res.group, res.plural)
                and (not ns or key[2] == ns)
                and labels(obj)
                and field_sel(obj)
            )

        def stream() -> Iterator[bytes]:
            seen = since
            if since == 0:
                with self.lock:
                    initial = [
                        self._served(o, res, version)
                        for k, o in sorted(self._objects.items())
                        if matches(k, o)
                    ]
                    seen = self._version
                for obj in initial:
                    yield (json.dumps({"type": "ADDED", "object": obj}) + "\n").encode()
            # the history is appended in resourceVersion order: read each entry once, from the
            # first after `seen` (rescanning all of it at every write was quadratic in writes)
            with self.lock:
                position = bisect.bisect_right([h[0] for h in self.history], seen)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                with self.changed:
                    if len(self.history) == position and not self.stopping:
                        self.changed.wait(0.5)
                    fresh = [h for h in self.history[position:] if matches(h[1], h[3])]
                    position = len(self.history)
                    stopping = self.stopping
                for rv, _, kind, obj in fresh:
                    seen = rv
                    yield (
                        json.dumps({"type": kind, "object": self._served(obj, res, version)}) + "\n"
                    ).encode()
                if stopping:
                    return

        return Response(stream(), content_type="application/json", direct_passthrough=True)

    # -- writes -------------------------------------------------------------------------------

    def _schema(self, res: Resource, version: str) -> Schema:
        key = (res.group, res.plural, version)
        if key not in self._schemas:
            if res.builtin:
                found = Schema.for_builtin(res.group, version, res.kind)
            else:
                crd = self._objects.get(
                    ("apiextensions.k8s.io", "customresourcedefinitions", "", res.crd)
                )
                found = None
                for served in (crd or {}).get("spec", {}).get("versions") or []:
                    if served.get("name") == version:
                        schema = (served.get("schema") or {}).get("openAPIV3Schema")
                        found = Schema.for_crd(
                            schema
                            or {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                        )
            self._schemas[key] = found
        schema = self._schemas[key]
        if schema is None:
            return Schema({"type": "object", "x-kubernetes-preserve-unknown-fields": True}, False)
        return schema

    def _require_namespace(self, res: Resource, ns: str, name: str) -> None:
        """NamespaceLifecycle admission: no new object in a namespace that is missing or going."""
        if not res.namespaced:
            return
        namespace = self._objects.get(("", "namespaces", "", ns))
        if namespace is None:
            raise fail(
                404, "NotFound", f'namespaces "{ns}" not found', {"name": ns, "kind": "namespaces"}
            )
        if namespace["metadata"].get("deletionTimestamp"):
            raise fail(
                403,
                "Forbidden",
                f'{res.qualified} "{name}" is forbidden: unable to create new content in namespace '
                f"{ns} because it is being terminated",
                {
                    "name": name,
                    "group": res.group,
                    "kind": res.plural,
                    "causes": [
                        {
                            "reason": "NamespaceTerminating",
                            "message": f"namespace {ns} is being terminated",
                            "field": "metadata.namespace",
                        }
                    ],
                },
            )

    def _apply(
        self,
        request: Request,
        user: User,
        res: Resource,
        version: str,
        ns: str,
        name: str,
        sub: str,
    ) -> Response:
        """Server-side apply ("Server-side apply" section of the recording)."""
        manager = request.args.get("fieldManager")
        if not manager:
            # Recorded: the "no fieldManager" row.
            raise fail(
                422,
                "Invalid",
                'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch',
                {
                    "group": "meta.k8s.io",
                    "kind": "PatchOptions",
                    "causes": [
                        {
                            "reason": "FieldValueRequired",
                            "message": "Required value: is required for apply patch",
                            "field": "fieldManager",
                        }
                    ],
                },
            )
        body = _document(request)
        schema = self._schema(res, version)
        self._check_identity(body, res, version, ns, name)
        # Recorded: the 500 rows. The typed patch is built before anything else is looked at, so
        # fieldValidation=Ignore does not help, and the answer has no reason and no causes
        # (kubernetes/kubernetes#139253).
        errors = typed_errors(fields.strip_nulls(body), schema)
        if errors:
            where = f"{(body.get('metadata') or {}).get('namespace', '')}/{name}"
            gvk = f"{res.api_version(version) if res.group else '/' + version}, Kind={res.kind}"
            detail = (
                errors[0] if len(errors) == 1 else "errors:\n" + "\n".join(f"  {e}" for e in errors)
            )
            raise fail(500, "", f"failed to create typed patch object ({where}; {gvk}): {detail}")
        key = (res.group, res.plural, ns, name)
        live = self._objects.get(key)
        if live is None:
            if sub:
                raise fail(
                    404,
                    "NotFound",
                    f'{res.qualified} "{name}" not found',
                    {"name": name, "group": res.group, "kind": res.plural},
                )
            # Recorded: "A server-side apply that creates an object needs the `create` verb".
            attrs = Attributes(
                user, "create", res.group, res.plural, "", ns if res.namespaced else "", name
            )
            if not self.authorizer.authorize(attrs).allowed:
                raise Failure(403, forbidden_status(attrs))
            self._require_namespace(res, ns, name)
        applied = fields.strip_nulls(copy.deepcopy(body))
        applied["apiVersion"] = res.api_version(version)
        applied.setdefault("metadata", {})["name"] = name
        if res.namespaced:
            applied["metadata"]["namespace"] = ns
        if sub == "status":
            applied = {
                k: v
                for k, v in applied.items()
                if k in ("apiVersion", "kind", "metadata", "status")
            }
            applied["metadata"] = {
                k: applied["metadata"][k] for k in ("name", "namespace") if k in applied["metadata"]
            }
        elif "status" in res.subresources:
            applied.pop("status", None)
        applied = fields.canonical(applied, schema)
        applied_set = fields.field_set(applied, schema)
        before = (
            copy.deepcopy(live)
            if live is not None
            else {"apiVersion": applied["apiVersion"], "kind": res.kind, "metadata": {}}
        )
        entries = copy.deepcopy((before.get("metadata") or {}).get("managedFields") or [])

        def mine_filter(e: dict[str, Any]) -> bool:
            return bool(
                e["manager"] == manager
                and e["operation"] == "Apply"
                and e.get("subresource", "") == sub
            )

        mine_before = next(
            (fields.from_fields_v1(e.get("fieldsV1") or {}) for e in entries if mine_filter(e)),
            set(),
        )
        others = [e for e in entries if not mine_filter(e)]
        found = fields.conflicts(before, applied, applied_set, others, manager, schema)
        if found and not _truthy(request.args.get("force")):
            # Recorded: the 409 row (field paths inside keyed lists as structured-merge-diff prints them).
            raise Failure(409, fields.conflict_status(found))
        for entry, path in found:  # forced: the other managers lose these fields
            theirs = fields.from_fields_v1(entry.get("fieldsV1") or {}) - {path}
            entry["fieldsV1"] = fields.to_fields_v1(theirs)
        others = [e for e in others if e.get("fieldsV1")]
        merged = fields.merge(before, applied, schema)
        still_owned = (
            set().union(*(fields.from_fields_v1(e["fieldsV1"]) for e in others))
            if others
            else set()
        )
        for path in sorted(mine_before - applied_set, key=len, reverse=True):
            if not any(q[: len(path)] == path for q in still_owned | applied_set):
                fields.remove(merged, path, schema)
        now = _now()
        old_mine = next((e for e in entries if mine_filter(e)), None)
        mine = {
            "manager": manager,
            "operation": "Apply",
            "apiVersion": res.api_version(version),
            "time": now,
            "fieldsType": "FieldsV1",
            "fieldsV1": fields.to_fields_v1(applied_set),
        }
        if sub:
            mine["subresource"] = sub
        stored = self._finish(merged, live, res, version, schema, sub)
        unchanged_sets = (
            old_mine is not None and old_mine["fieldsV1"] == mine["fieldsV1"] and not found
        )
        if live is not None and unchanged_sets and _content(stored) == _content(live):
            # Recorded: "A no-op apply changes neither resourceVersion nor generation."
            return _json(self._served(live, res, version))
        if (
            old_mine is not None
            and old_mine["fieldsV1"] == mine["fieldsV1"]
            and _content(stored) == _content(live or {})
        ):
            mine["time"] = old_mine["time"]
        stored["metadata"]["managedFields"] = _sorted_entries([*others, mine])
        return self._commit(request, key, stored, live, res, version)

    def _finish(
        self,
        merged: dict[str, Any],
        live: dict[str, Any] | None,
        res: Resource,
        version: str,
        schema: Schema,
        sub: str,
    ) -> dict[str, Any]:
        """The object as the API server would store it, validated (422 when it is not valid)."""
        stored = fields.stored_form(merged, schema)
        meta = stored.setdefault("metadata", {})
        if live is not None:
            for key in (
                "uid",
                "creationTimestamp",
                "generation",
                "resourceVersion",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
            ):
                if key in live["metadata"]:
                    meta[key] = live["metadata"][key]
                else:
                    meta.pop(key, None)
            if sub != "status" and "status" in res.subresources:
                if live.get("status") is not None:
                    stored["status"] = copy.deepcopy(live["status"])
                else:
                    stored.pop("status", None)
            if sub == "status":
                stored = {**copy.deepcopy(live), "status": stored.get("status")}
                stored["metadata"] = meta
                if stored["status"] is None:
                    stored.pop("status")
        if res.builtin:
            builtin.set_defaults(stored, self._cluster_ip(live))
        else:
            builtin.crd_defaults(stored, schema)
        self._validate(stored, res, schema)
        return stored

    def _cluster_ip(self, live: dict[str, Any] | None) -> str:
        existing = ((live or {}).get("spec") or {}).get("clusterIP")
        if existing:
            return str(existing)
        n = next(self._ips)
        return f"10.96.{n // 250}.{n % 250 + 1}"

    def _validate(self, stored: dict[str, Any], res: Resource, schema: Schema) -> None:
        name = str(stored["metadata"].get("name", ""))
        if res.builtin:
            errors = builtin.builtin_errors(stored)
        else:
            errors = builtin.name_errors(res.kind, name) if name else []
            errors += builtin.label_errors("metadata.labels", stored["metadata"].get("labels"))
            errors += value_errors(stored, schema)
            rules = cel_rules(schema)
            if errors and rules:
                errors.append(CEL_SKIPPED)  # recorded: the HTTPRoute row
            elif rules:
                self.unchecked_cel.append((res.kind, name, rules))
        if errors:
            raise invalid_failure(res.kind, res.group, name, errors)

    def _commit(
        self,
        request: Request,
        key: Key,
        stored: dict[str, Any],
        live: dict[str, Any] | None,
        res: Resource,
        version: str,
    ) -> Response:
        meta = stored["metadata"]
        if live is None:
            meta["uid"] = self._uid()
            meta["creationTimestamp"] = _now()
            if res.kind in _GENERATION_KINDS or not res.builtin:
                meta["generation"] = 1
        elif "generation" in meta and _spec(stored) != _spec(live):
            meta["generation"] = int(meta["generation"]) + 1
        if _dry_run(request):
            if live is not None:
                meta["resourceVersion"] = live["metadata"]["resourceVersion"]
            return _json(self._served(stored, res, version), 201 if live is None else 200)
        meta["resourceVersion"] = self._next()
        self._store(key, stored, "ADDED" if live is None else "MODIFIED")
        self._after_write(res, key, stored)
        return _json(self._served(stored, res, version), 201 if live is None else 200)

    def _after_write(self, res: Resource, key: Key, stored: dict[str, Any]) -> None:
        meta = stored["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._remove(key)  # the last finalizer is gone: the deletion completes
        if res.kind == "CustomResourceDefinition":
            self._serve_crds()

    def _check_identity(
        self,
        body: dict[str, Any],
        res: Resource,
        version: str,
        ns: str,
        name: str,
        *,
        default_kind: bool = False,
    ) -> None:
        if default_kind:
            # A create or update decodes its body with the URL's kind as the default
            # (`decoder.Decode(body, &defaultGVK, original)` in handlers/create.go and update.go),
            # and the JSON serializer fills in what the body leaves out (gvkWithDefaults in
            # apimachinery/pkg/runtime/serializer/json/json.go): a body without apiVersion and
            # kind is the URL's kind, as kopf posts its Events. A body that names another kind or
            # version is still refused below. (An apply patch is not decoded that way.)
            body.setdefault("kind", res.kind)
            if not body.get("apiVersion"):
                body["apiVersion"] = res.api_version(version)
        if body.get("kind") != res.kind or body.get("apiVersion") != res.api_version(version):
            raise fail(
                400,
                "BadRequest",
                f"the API version in the data ({body.get('apiVersion')}) does not match the "
                f"expected API version ({res.api_version(version)})"
                if body.get("kind") == res.kind
                else f"the kind in the data ({body.get('kind')}) does not match the expected kind ({res.kind})",
            )
        meta = body.get("metadata") or {}
        if name and meta.get("name") not in (None, name):
            raise fail(
                400,
                "BadRequest",
                f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})",
            )
        if res.namespaced and meta.get("namespace") not in (None, ns):
            raise fail(
                400,
                "BadRequest",
                "the namespace of the provided object does not match the namespace sent on the request",
            )

    # -- updates that are not applies ------------------------------------------------------------

    def _create(
        self, request: Request, user: User, res: Resource, version: str, ns: str
    ) -> Response:
        body = _document(request)
        meta = body.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = f"{meta['generateName']}{secrets.token_hex(3)[:5]}"
        name = str(meta.get("name") or "")
        self._check_identity(body, res, version, ns, name, default_kind=True)
        if not name:
            raise invalid_failure(res.kind, res.group, "", [builtin.required("metadata.name")])
        key = (res.group, res.plural, ns if res.namespaced else "", name)
        if key in self._objects:
            raise fail(
                409,
                "AlreadyExists",
                f'{res.qualified} "{name}" already exists',
                {"name": name, "group": res.group, "kind": res.plural},
            )
        self._require_namespace(res, ns, name)
        new = self._decoded(request, body, res, version, name)
        if res.namespaced:
            new["metadata"]["namespace"] = ns
        new["metadata"].pop("managedFields", None)
        stored = self._finish(new, None, res, version, self._schema(res, version), "")
        manager = _manager(request)
        stored["metadata"]["managedFields"] = _sorted_entries(
            [
                _update_entry(
                    manager,
                    res.api_version(version),
                    fields.field_set(stored, self._schema(res, version)),
                    "",
                )
            ]
        )
        return self._commit(request, key, stored, None, res, version)

    def _put(
        self,
        request: Request,
        user: User,
        res: Resource,
        version: str,
        ns: str,
        name: str,
        sub: str,
    ) -> Response:
        body = _document(request)
        self._check_identity(body, res, version, ns, name, default_kind=True)
        live = self._objects.get((res.group, res.plural, ns, name))
        if live is None:
            raise fail(
                404,
                "NotFound",
                f'{res.qualified} "{name}" not found',
                {"name": name, "group": res.group, "kind": res.plural},
            )
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if wanted and wanted != live["metadata"]["resourceVersion"]:
            raise fail(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {res.qualified} "{name}": the object has been '
                "modified; please apply your changes to the latest version and try again",
                {"name": name, "group": res.group, "kind": res.plural},
            )
        return self._update(
            request,
            res,
            version,
            ns,
            name,
            sub,
            self._decoded(request, body, res, version, name),
            live,
        )

    def _patch(
        self,
        request: Request,
        user: User,
        res: Resource,
        version: str,
        ns: str,
        name: str,
        sub: str,
        content_type: str,
    ) -> Response:
        live = self._objects.get((res.group, res.plural, ns, name))
        if live is None:
            raise fail(
                404,
                "NotFound",
                f'{res.qualified} "{name}" not found',
                {"name": name, "group": res.group, "kind": res.plural},
            )
        try:
            patch = json.loads(request.get_data(as_text=True) or "null")
        except ValueError as exc:
            raise fail(400, "BadRequest", f"error decoding patch: {exc}") from None
        current = self._served(live, res, version)
        if content_type == "application/merge-patch+json":
            patched = _merge_patch(copy.deepcopy(current), patch)
        elif content_type == "application/json-patch+json":
            try:
                patched = jsonpatch.apply_patch(copy.deepcopy(current), patch)
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
                raise fail(
                    422,
                    "Invalid",
                    f"the server rejected our request due to an error in our request: {exc}",
                ) from None
        elif content_type == "application/strategic-merge-patch+json":
            if not res.builtin:
                raise fail(
                    415,
                    "UnsupportedMediaType",
                    "strategic merge patch is not supported for custom resources; use a merge patch",
                )
            patched = _strategic_merge(copy.deepcopy(current), patch, self._schema(res, version))
        else:
            raise fail(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format: {content_type}",
            )
        if not isinstance(patched, dict):
            raise fail(400, "BadRequest", "the patch does not produce an object")
        return self._update(
            request,
            res,
            version,
            ns,
            name,
            sub,
            self._decoded(request, patched, res, version, name),
            live,
        )

    def _decoded(
        self, request: Request, body: dict[str, Any], res: Resource, version: str, name: str
    ) -> dict[str, Any]:
        """An object given whole (create, update, patch) as the API server decodes it: a type the
        schema does not allow is refused, unknown fields are pruned (with a warning) or, under
        fieldValidation=Strict, refused."""
        schema = self._schema(res, version)
        clean = fields.strip_nulls(body)
        if res.builtin:
            errors = [e for e in typed_errors(clean, schema) if "field not declared" not in e]
            if errors:
                raise fail(400, "BadRequest", f"unable to decode the request body: {errors[0]}")
        paths = pruned_paths(clean, schema)
        if res.builtin:
            paths = [p for p in paths if not p.startswith("status")]
        if paths and request.args.get("fieldValidation") == "Strict":
            shown = ", ".join(f'unknown field "{p}"' for p in paths)
            raise fail(400, "BadRequest", f"strict decoding error: {shown}")
        if paths:
            self.pruned.append((res.kind, name, paths))
            clean = prune(clean, schema, paths)
        return clean

    def _update(
        self,
        request: Request,
        res: Resource,
        version: str,
        ns: str,
        name: str,
        sub: str,
        new: dict[str, Any],
        live: dict[str, Any],
    ) -> Response:
        key = (res.group, res.plural, ns, name)
        schema = self._schema(res, version)
        meta = new.setdefault("metadata", {})
        meta["name"] = name
        if res.namespaced:
            meta["namespace"] = ns
        meta["managedFields"] = copy.deepcopy(live["metadata"].get("managedFields") or [])
        if sub == "" and "status" in res.subresources:
            new.pop("status", None)
        stored = self._finish(new, live, res, version, schema, sub)
        if _content(stored) == _content(live):
            return _json(self._served(live, res, version))
        changed, removed = fields.changed_paths(live, stored, schema)
        if sub != "status":
            changed = (
                {p for p in changed if p[0] != "f:status"}
                if "status" in res.subresources
                else changed
            )
        manager = _manager(request)
        stored["metadata"]["managedFields"] = _updated_entries(
            live["metadata"].get("managedFields") or [],
            manager,
            res.api_version(version),
            changed,
            removed,
            sub,
        )
        return self._commit(request, key, stored, live, res, version)

    # -- deletion -----------------------------------------------------------------------------

    def _delete(
        self, request: Request, res: Resource, version: str, ns: str, name: str
    ) -> Response:
        key = (res.group, res.plural, ns, name)
        live = self._objects.get(key)
        if live is None:
            raise fail(
                404,
                "NotFound",
                f'{res.qualified} "{name}" not found',
                {"name": name, "group": res.group, "kind": res.plural},
            )
        options = _delete_options(request)
        # DeleteOptions.preconditions.uid: Preconditions.Check in
        # staging/src/k8s.io/apiserver/pkg/storage/interfaces.go (v1.36.0) fails with an invalid-
        # object error that InterpretDeleteError (pkg/storage/errors) turns into a 409 Conflict
        wanted = (options.get("preconditions") or {}).get("uid")
        if wanted is not None and wanted != live["metadata"].get("uid"):
            raise fail(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {res.qualified} "{name}": Precondition '
                f"failed: UID in precondition: {wanted}, UID in object meta: "
                f"{live['metadata'].get('uid')}",
                {"name": name, "group": res.group, "kind": res.plural},
            )
        if _dry_run(request):
            return _json(self._served(live, res, version))
        gone = self.request_deletion(key, options.get("propagationPolicy"))
        if gone:
            return _json(
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Success",
                    "details": {
                        "name": name,
                        "group": res.group,
                        "kind": res.plural,
                        "uid": live["metadata"]["uid"],
                    },
                }
            )
        return _json(self._served(self._objects[key], res, version))

    def _delete_collection(
        self, request: Request, res: Resource, version: str, ns: str
    ) -> Response:
        listing = self._list(request, res, version, ns)
        options = _delete_options(request)
        for item in listing["items"]:
            meta = item["metadata"]
            self.request_deletion(
                (res.group, res.plural, meta.get("namespace", ""), meta["name"]),
                options.get("propagationPolicy"),
            )
        return _json(
            {
                "kind": f"{res.kind}List",
                "apiVersion": res.api_version(version),
                "metadata": {},
                "items": listing["items"],
            }
        )

    def request_deletion(self, key: Key, policy: str | None = None) -> bool:
        """Delete as the API server does: True when the object is gone now; False when it waits,
        with deletionTimestamp set, for its finalizers (recorded: "A resource with a finalizer
        stays, with `deletionTimestamp` set, until its finalizer is removed"). Dependents are
        left to the garbage collector, which deletes them later (recorded: "Dependents ... are
        deleted by the controller-manager's garbage collector, asynchronously")."""
        with self.changed:
            obj = copy.deepcopy(self._objects[key])
            meta = obj["metadata"]
            finalizers = list(meta.get("finalizers") or [])
            if key[1] == "namespaces" and key[0] == "":
                obj.setdefault("spec", {})["finalizers"] = ["kubernetes"]
                obj.setdefault("status", {})["phase"] = "Terminating"
                finalizers = finalizers or []
                if not meta.get("deletionTimestamp"):
                    meta["deletionTimestamp"] = _now()
                    meta["resourceVersion"] = self._next()
                    self._store(key, obj, "MODIFIED")
                return False
            if policy == "Foreground" and "foregroundDeletion" not in finalizers:
                finalizers.append("foregroundDeletion")
            if policy == "Orphan" and "orphan" not in finalizers:
                finalizers.append("orphan")
            if not finalizers:
                self._remove(key)
                return True
            if not meta.get("deletionTimestamp") or finalizers != list(
                meta.get("finalizers") or []
            ):
                meta["finalizers"] = finalizers
                meta.setdefault("deletionTimestamp", _now())
                meta["deletionGracePeriodSeconds"] = 0
                meta["resourceVersion"] = self._next()
                self._store(key, obj, "MODIFIED")
            return False

    # -- subresources -------------------------------------------------------------------------

    def _token_request(self, res: Resource, ns: str, name: str) -> dict[str, Any]:
        if ("", "serviceaccounts", ns, name) not in self._objects:
            raise fail(
                404,
                "NotFound",
                f'serviceaccounts "{name}" not found',
                {"name": name, "kind": "serviceaccounts"},
            )
        token = self.token_for(service_account_user(ns, name))
        return {
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"audiences": ["https://kubernetes.default.svc"], "expirationSeconds": 3600},
            "status": {"token": token, "expirationTimestamp": _now(3600)},
        }

    def _access_review(self, request: Request, user: User) -> dict[str, Any]:
        body = _document(request)
        wanted = (body.get("spec") or {}).get("resourceAttributes") or {}
        attrs = Attributes(
            user,
            str(wanted.get("verb", "")),
            str(wanted.get("group", "")),
            str(wanted.get("resource", "")),
            str(wanted.get("subresource", "")),
            str(wanted.get("namespace", "")),
            str(wanted.get("name", "")),
        )
        decision = self.authorizer.authorize(attrs)
        return {
            **body,
            "status": {
                "allowed": decision.allowed,
                **({"reason": f"allowed by {decision.via}"} if decision.allowed else {}),
            },
        }

    # -- CRDs -----------------------------------------------------------------------------------

    def _serve_crds(self) -> None:
        """Serve the kinds of every stored CRD (and stop serving those of deleted ones)."""
        served = {(r.group, r.plural): r for r in BUILTIN}
        for key, crd in self._objects.items():
            if key[:2] != ("apiextensions.k8s.io", "customresourcedefinitions"):
                continue
            spec = crd.get("spec") or {}
            names = spec.get("names") or {}
            versions = tuple(v["name"] for v in spec.get("versions") or [] if v.get("served", True))
            subresources = set()
            for v in spec.get("versions") or []:
                subresources |= set((v.get("subresources") or {}).keys())
            served[(spec["group"], names["plural"])] = Resource(
                spec["group"],
                versions,
                names["plural"],
                names["kind"],
                spec.get("scope") == "Namespaced",
                tuple(sorted(subresources)),
                names.get("singular", names["kind"].lower()),
                tuple(names.get("shortNames") or ()),
                tuple(names.get("categories") or ()),
                key[3],
            )
            status = crd.setdefault("status", {})
            if not status.get("conditions"):
                status["conditions"] = [
                    {
                        "type": "NamesAccepted",
                        "status": "True",
                        "reason": "NoConflicts",
                        "message": "no conflicts found",
                        "lastTransitionTime": _now(),
                    },
                    {
                        "type": "Established",
                        "status": "True",
                        "reason": "InitialNamesAccepted",
                        "message": "the initial names have been accepted",
                        "lastTransitionTime": _now(),
                    },
                ]
                status["acceptedNames"] = names
                status["storedVersions"] = [
                    v["name"] for v in spec.get("versions") or [] if v.get("storage")
                ]
        self._resources = served
        self._schemas.clear()

    # -- the store ------------------------------------------------------------------------------

    def _of_kind(self, kind: str) -> list[dict[str, Any]]:
        plural = {
            "Role": "roles",
            "RoleBinding": "rolebindings",
            "ClusterRole": "clusterroles",
            "ClusterRoleBinding": "clusterrolebindings",
        }.get(kind)
        with self.lock:  # the RBAC index: every request reads it, so no scan of every object
            return list(self._rbac.get(plural or "", {}).values())

    def _store(self, key: Key, obj: dict[str, Any], kind: str) -> None:
        with self.changed:
            self._objects[key] = obj
            if key[0] == "rbac.authorization.k8s.io":
                self._rbac.setdefault(key[1], {})[key] = obj
            self.history.append(
                (int(obj["metadata"]["resourceVersion"]), key, kind, copy.deepcopy(obj))
            )
            self.changed.notify_all()

    def _remove(self, key: Key) -> None:
        with self.changed:
            obj = self._objects.pop(key, None)
            if obj is None:
                return
            self._rbac.get(key[1], {}).pop(key, None)
            obj = copy.deepcopy(obj)
            obj["metadata"]["resourceVersion"] = self._next()
            self.history.append((int(obj["metadata"]["resourceVersion"]), key, "DELETED", obj))
            if key[:2] == ("apiextensions.k8s.io", "customresourcedefinitions"):
                spec = obj.get("spec") or {}
                group, plural = spec.get("group"), (spec.get("names") or {}).get("plural")
                for other in [k for k in self._objects if k[:2] == (group, plural)]:
                    self._remove(other)
                self._serve_crds()
            self.changed.notify_all()

    def _uid(self) -> str:
        n = next(self._uids)
        return f"{n:08x}-0000-4000-8000-{secrets.token_hex(6)}"

    def _next(self) -> str:
        self._version += 1
        return str(self._version)

    # -- what the controllers and tests use --------------------------------------------------------

    def resource_of(self, group: str, plural: str) -> Resource:
        with self.lock:
            return self._resources[(group, plural)]

    def stored(self) -> dict[Key, dict[str, Any]]:
        with self.lock:
            return {k: copy.deepcopy(v) for k, v in self._objects.items()}

    def view(self) -> dict[Key, dict[str, Any]]:
        """The stored objects themselves, not copies: read them, never change them (deep-copy
        one before changing it). A write replaces an object, so a view taken before it keeps
        the old one. What the controllers read every 50 ms: at 1,000 resources (10,000
        objects) a deep copy per read kept a core busy and starved the API's handlers."""
        with self.lock:
            return dict(self._objects)

    def system_create(
        self, key: Key, obj: dict[str, Any], manager: str = "kube-controller-manager"
    ) -> dict[str, Any]:
        """Create an object as a component of the control plane would (no RBAC, validated)."""
        with self.changed:
            res = self._resources[key[:2]]
            version = res.versions[0]
            schema = self._schema(res, version)
            obj = copy.deepcopy(obj)
            obj["apiVersion"] = res.api_version(version)
            meta = obj.setdefault("metadata", {})
            meta["name"] = key[3]
            if res.namespaced:
                meta["namespace"] = key[2]
            meta.pop("managedFields", None)
            stored = self._finish(obj, None, res, version, schema, "")
            meta = stored["metadata"]
            meta["uid"] = self._uid()
            meta["creationTimestamp"] = _now()
            if res.kind in _GENERATION_KINDS or not res.builtin:
                meta["generation"] = 1
            meta["managedFields"] = [
                _update_entry(
                    manager, res.api_version(version), fields.field_set(stored, schema), ""
                )
            ]
            meta["resourceVersion"] = self._next()
            self._store(key, stored, "ADDED")
            self._after_write(res, key, stored)
            return copy.deepcopy(stored)

    def system_update(
        self, key: Key, obj: dict[str, Any], manager: str, subresource: str = ""
    ) -> dict[str, Any] | None:
        """Replace an object (or only its status, with subresource="status") as a control-plane
        component or a client other than specdeploy would: an Update entry in managedFields."""
        with self.changed:
            live = self._objects.get(key)
            if live is None:
                return None
            res = self._resources[key[:2]]
            version = res.versions[0]
            schema = self._schema(res, version)
            new = copy.deepcopy(obj)
            new["apiVersion"] = res.api_version(version)
            new.setdefault("metadata", {})["managedFields"] = copy.deepcopy(
                live["metadata"].get("managedFields") or []
            )
            if subresource == "" and "status" in res.subresources:
                new.pop("status", None)
            stored = self._finish(new, live, res, version, schema, subresource)
            if _content(stored) == _content(live):
                return copy.deepcopy(live)
            changed, removed = fields.changed_paths(live, stored, schema)
            if subresource != "status" and "status" in res.subresources:
                changed = {p for p in changed if p[0] != "f:status"}
            stored["metadata"]["managedFields"] = _updated_entries(
                live["metadata"].get("managedFields") or [],
                manager,
                res.api_version(version),
                changed,
                removed,
                subresource,
            )
            if "generation" in stored["metadata"] and _spec(stored) != _spec(live):
                stored["metadata"]["generation"] = int(stored["metadata"]["generation"]) + 1
            stored["metadata"]["resourceVersion"] = self._next()
            self._store(key, stored, "MODIFIED")
            self._after_write(res, key, stored)
            return copy.deepcopy(stored)

    def system_remove(self, key: Key) -> None:
        with self.changed:
            self._remove(key)


# -- helpers ----------------------------------------------------------------------------------------


def kubeconfig_text(server: str, token: str, namespace: str = "default") -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "imitation", "cluster": {"server": server}}],
            "users": [{"name": "imitation", "user": {"token": token}}],
            "contexts": [
                {
                    "name": "imitation",
                    "context": {
                        "cluster": "imitation",
                        "user": "imitation",
                        "namespace": namespace,
                    },
                }
            ],
            "current-context": "imitation",
        }
    )


def _group_entry(group: str, versions: list[str]) -> dict[str, Any]:
    ordered = sorted(versions, key=_version_priority)
    entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in ordered]
    return {"name": group, "versions": entries, "preferredVersion": entries[0]}


def _version_priority(version: str) -> tuple[int, int, int]:
    """Kubernetes version priority: GA before beta before alpha, higher numbers first."""
    match = re.match(r"^v(\d+)(?:(alpha|beta)(\d+))?$", version)
    if match is None:
        return (3, 0, 0)
    stage = {"": 0, "beta": 1, "alpha": 2}[match[2] or ""]
    return (stage, -int(match[1]), -int(match[3] or 0))


def _resource_list(group_version: str, resources: list[Resource]) -> dict[str, Any]:
    out = []
    for r in sorted(resources, key=lambda r: r.plural):
        out.append(
            {
                "name": r.plural,
                "singularName": r.singular,
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": list(r.verbs),
                **({"shortNames": list(r.short_names)} if r.short_names else {}),
                **({"categories": list(r.categories)} if r.categories else {}),
            }
        )
        for sub in r.subresources:
            verbs = {"status": ["get", "patch", "update"], "log": ["get"], "token": ["create"]}.get(
                sub, ["get"]
            )
            kind = {"log": "Pod", "token": "TokenRequest"}.get(sub, r.kind)
            out.append(
                {
                    "name": f"{r.plural}/{sub}",
                    "singularName": "",
                    "namespaced": r.namespaced,
                    "kind": kind,
                    "verbs": verbs,
                }
            )
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": out,
    }


def _json(document: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(
        json.dumps(document), status=status, content_type="application/json", headers=headers
    )


def _document(request: Request) -> dict[str, Any]:
    text = request.get_data(as_text=True)
    try:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        body = yaml.load(text, Loader=loader) if text.strip() else None
    except yaml.YAMLError as exc:
        raise fail(400, "BadRequest", f"error decoding YAML: {exc}") from None
    if not isinstance(body, dict):
        raise fail(400, "BadRequest", "the body of the request is not an object")
    return body


def _truthy(value: str | None) -> bool:
    return value in ("true", "1", "True")


def _dry_run(request: Request) -> bool:
    return request.args.get("dryRun") == "All"


def _manager(request: Request) -> str:
    """fieldManager, else the user agent up to its first '/' (the API server's default)."""
    explicit = request.args.get("fieldManager")
    if explicit:
        return explicit
    agent = request.headers.get("User-Agent", "") or "unknown"
    return agent.split("/")[0]


def _delete_options(request: Request) -> dict[str, Any]:
    options: dict[str, Any] = {}
    text = request.get_data(as_text=True)
    if text.strip():
        try:
            parsed = json.loads(text)
            if isinstance(parsed, dict):
                options = parsed
        except ValueError:
            pass
    if request.args.get("propagationPolicy"):
        options["propagationPolicy"] = request.args["propagationPolicy"]
    return options


def _now(offset: float = 0.0) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + offset))


def _content(obj: dict[str, Any]) -> str:
    """An object's content for no-op detection: without its resourceVersion and the times of
    its managedFields entries."""
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "resourceVersion"}
    meta["managedFields"] = [
        {k: v for k, v in e.items() if k != "time"} for e in meta.get("managedFields") or []
    ]
    return json.dumps({**obj, "metadata": meta}, sort_keys=True)


def _spec(obj: dict[str, Any]) -> str:
    """Everything but metadata and status: what metadata.generation counts changes of."""
    return json.dumps(
        {k: v for k, v in obj.items() if k not in ("metadata", "status")}, sort_keys=True
    )


def _update_entry(
    manager: str, api_version: str, paths: set[Any], subresource: str
) -> dict[str, Any]:
    entry = {
        "manager": manager,
        "operation": "Update",
        "apiVersion": api_version,
        "time": _now(),
        "fieldsType": "FieldsV1",
        "fieldsV1": fields.to_fields_v1(paths),
    }
    if subresource:
        entry["subresource"] = subresource
    return entry


def _updated_entries(
    entries: list[dict[str, Any]],
    manager: str,
    api_version: str,
    changed: set[Any],
    removed: set[Any],
    subresource: str,
) -> list[dict[str, Any]]:
    """managedFields after an Update by `manager`: it owns what it changed, the others lose it."""
    out = []
    mine: set[Any] = set()
    for entry in entries:
        owned = fields.from_fields_v1(entry.get("fieldsV1") or {})
        if (
            entry["manager"] == manager
            and entry["operation"] == "Update"
            and entry.get("subresource", "") == subresource
        ):
            mine = owned
            continue
        owned -= changed | removed
        if owned:
            out.append({**entry, "fieldsV1": fields.to_fields_v1(owned)})
    mine = (mine | changed) - removed
    if mine:
        out.append(_update_entry(manager, api_version, mine, subresource))
    return _sorted_entries(out)


def _sorted_entries(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """By operation (Apply first), then time, manager, apiVersion and subresource, as the API
    server sorts managedFields."""
    return sorted(
        entries,
        key=lambda e: (
            e["operation"],
            e.get("time", ""),
            e["manager"],
            e["apiVersion"],
            e.get("subresource", ""),
        ),
    )


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return patch
    if not isinstance(target, dict):
        target = {}
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = _merge_patch(target.get(key), value)
    return target


def _strategic_merge(target: Any, patch: Any, schema: Schema) -> Any:
    """A strategic merge patch: a merge patch whose keyed lists (x-kubernetes-patch-merge-key)
    merge item by item."""
    if isinstance(patch, dict) and isinstance(target, dict):
        for key, value in patch.items():
            if key.startswith("$"):
                continue
            sub = schema.field(key) or Schema({}, schema.builtin)
            if value is None:
                target.pop(key, None)
            else:
                target[key] = _strategic_merge(target.get(key), value, sub)
        return target
    merge_key = (
        schema.node.get("x-kubernetes-patch-merge-key") if isinstance(schema.node, dict) else None
    )
    if isinstance(patch, list) and isinstance(target, list) and merge_key:
        out = list(target)
        for item in patch:
            if not isinstance(item, dict):
                continue
            at = next(
                (
                    i
                    for i, t in enumerate(out)
                    if isinstance(t, dict) and t.get(merge_key) == item.get(merge_key)
                ),
                None,
            )
            if item.get("$patch") == "delete":
                if at is not None:
                    out.pop(at)
            elif at is None:
                out.append(item)
            else:
                out[at] = _strategic_merge(out[at], item, schema.items())
        return out
    return patch


def _label_selector(text: str | None) -> Any:
    """A predicate for labelSelector (=, ==, !=, in, notin, exists, !exists)."""
    if not text:
        return lambda obj: True
    terms = []
    for part in re.split(r",(?![^()]*\))", text):
        part = part.strip()
        if not part:
            continue
        set_match = re.match(r"^([^\s!=]+)\s+(in|notin)\s+\(([^)]*)\)$", part)
        if set_match:
            values = {v.strip() for v in set_match[3].split(",")}
            terms.append((set_match[1], set_match[2], values))
        elif "!=" in part:
            k, v = part.split("!=", 1)
            terms.append((k.strip(), "!=", {v.strip()}))
        elif "=" in part:
            k, v = part.replace("==", "=").split("=", 1)
            terms.append((k.strip(), "=", {v.strip()}))
        elif part.startswith("!"):
            terms.append((part[1:], "!exists", set()))
        else:
            terms.append((part, "exists", set()))

    def check(obj: dict[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        for key, op, values in terms:
            present = key in labels
            if op in ("=", "in") and (not present or labels[key] not in values):
                return False
            if op in ("!=", "notin") and present and labels[key] in values:
                return False
            if op == "exists" and not present:
                return False
            if op == "!exists" and present:
                return False
        return True

    return check


def _field_selector(text: str | None) -> Any:
    if not text:
        return lambda obj: True
    terms = []
    for part in text.split(","):
        if "!=" in part:
            k, v = part.split("!=", 1)
            terms.append((k, False, v))
        elif "=" in part:
            k, v = part.replace("==", "=").split("=", 1)
            terms.append((k, True, v))

    def check(obj: dict[str, Any]) -> bool:
        for key, equal, value in terms:
            node: Any = obj
            for part in key.split("."):
                node = node.get(part) if isinstance(node, dict) else None
            if (str(node if node is not None else "") == value) != equal:
                return False
        return True

    return check
