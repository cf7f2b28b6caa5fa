"""A loopback Kubernetes API that a real kopf operator can run against (no cluster here).

It extends the deploy tests' fake (`tests.unit.deploy.fake_kube`: server-side apply with field
ownership and 409 conflicts) with what an operator needs: the SpeculativeDeployment CRD served
at specdeploy.io/v1 with its status subresource (the main endpoint ignores status, /status
changes only status, metadata.generation counts spec changes), LIST with a resourceVersion and
WATCH streams (chunked JSON lines, resumable from a resourceVersion), JSON merge-patch and JSON
patch, POST (Events), and the garbage collector: deleting an object deletes every object whose
ownerReferences name its uid. It runs on a threaded werkzeug server, so watches stream while
other requests are answered.

The service proxy (`/api/v1/namespaces/{ns}/services/[scheme:]{name}[:{port}]/proxy/{path}`) is
imitated from kube-apiserver v1.36.0: `ProxyREST.Connect` (pkg/registry/core/service/proxy.go)
resolves one ready endpoint of the Service (`ResolveEndpoint`,
staging/src/k8s.io/apiserver/pkg/util/proxy/proxy.go: the Service's port by name or number, its
targetPort by number or by the container port's name, a ready pod the selector picks; 404 for a
missing Service, 503 `no endpoints available for service` without one) and forwards the request
there, passing the response on as it arrives (Go's reverse proxy flushes `text/event-stream` at
once). Here a pod's endpoint is its `status.podIP` and the port its container declares; the
Endpoints/EndpointSlice objects the endpoints controller would write are not imitated.
"""

from __future__ import annotations

import copy
import itertools
import json
import logging
import random
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import jsonpatch
import yaml
from werkzeug import Request, Response
from werkzeug.serving import make_server

from tests.unit.deploy.fake_kube import (
    _conflict_status,
    _conflicts,
    _content,
    _json,
    _leaves,
    _managed_fields,
    _merge,
    _status,
    _stringify_quantities,
)

Key = tuple[str, str, str, str]  # (group/version path, plural, namespace, name)

#: (group/version path, plural) -> (kind, has a status subresource)
RESOURCES: dict[tuple[str, str], tuple[str, bool]] = {
    ("api/v1", "configmaps"): ("ConfigMap", False),
    ("api/v1", "services"): ("Service", False),
    ("api/v1", "persistentvolumeclaims"): ("PersistentVolumeClaim", True),
    ("api/v1", "pods"): ("Pod", True),
    ("api/v1", "events"): ("Event", False),
    ("apis/apps/v1", "deployments"): ("Deployment", True),
    ("apis/specdeploy.io/v1", "speculativedeployments"): ("SpeculativeDeployment", True),
    ("apis/gateway.networking.k8s.io/v1", "httproutes"): ("HTTPRoute", True),
    ("api/v1", "namespaces"): ("Namespace", True),
    ("apis/apiextensions.k8s.io/v1", "customresourcedefinitions"): (
        "CustomResourceDefinition",
        True,
    ),
}
#: Kinds without a namespace (kopf discovers namespaces and CRDs before it watches anything).
CLUSTER_SCOPED = frozenset({"namespaces", "customresourcedefinitions"})
_PROXY = re.compile(
    r"^/api/v1/namespaces/(?P<ns>[^/]+)/services/(?:(?P<scheme>https?):)?(?P<name>[^/:]+)"
    r"(?::(?P<port>[^/]+))?/proxy(?P<rest>/.*)?$"
)
_PATH = re.compile(
    r"^/(?P<gv>api/v1|apis/[^/]+/[^/]+)(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[^/]+)"
    r"(?:/(?P<name>[^/]+))?(?:/(?P<sub>status))?$"
)


@dataclass
class FakeCluster:
    """Objects, their field owners and an event log that watches follow."""

    objects: dict[Key, dict[str, Any]] = field(default_factory=dict)
    owners: dict[Key, dict[tuple[str, ...], str]] = field(default_factory=dict)
    requests: list[tuple[str, str, str]] = field(default_factory=list)
    """(method, path with query, User-Agent)."""
    history: list[tuple[int, Key, str, dict[str, Any]]] = field(default_factory=list)
    refuse: dict[str, int] = field(default_factory=dict)
    proxied: list[tuple[str, str, str | None]] = field(default_factory=list)
    """Service-proxy requests: (method, path with query, Authorization header)."""
    _version: int = 1000
    _uids: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    _changed: threading.Condition = field(default_factory=threading.Condition)
    _stopping: bool = False

    # -- what tests use --

    def get(self, gv: str, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        with self._changed:
            found = self.objects.get((gv, plural, namespace, name))
            return copy.deepcopy(found) if found is not None else None

    def list(self, gv: str, plural: str, namespace: str = "default") -> list[dict[str, Any]]:
        with self._changed:
            return [
                copy.deepcopy(o)
                for (g, p, ns, _), o in sorted(self.objects.items())
                if (g, p, ns) == (gv, plural, namespace)
            ]

    def put(
        self, gv: str, plural: str, obj: dict[str, Any], manager: str = "kubectl"
    ) -> dict[str, Any]:
        """Create or replace an object as another client would (kubectl apply, a kubelet)."""
        with self._changed:
            meta = obj["metadata"]
            namespace = meta.setdefault("namespace", "default")
            key = (gv, plural, namespace, meta["name"])
            current = self.objects.get(key)
            stored = copy.deepcopy(obj)
            self._stamp(stored, current)
            if current is not None and current.get("status") is not None and "status" not in obj:
                stored["status"] = current["status"]
            owners = self.owners.setdefault(key, {})
            owners.update(
                dict.fromkeys(_leaves({k: v for k, v in obj.items() if k != "status"}), manager)
            )
            self._store(key, stored, "MODIFIED" if current else "ADDED")
            return copy.deepcopy(stored)

    def set_status(
        self, gv: str, plural: str, namespace: str, name: str, status: dict[str, Any]
    ) -> None:
        with self._changed:
            key = (gv, plural, namespace, name)
            obj = copy.deepcopy(self.objects[key])
            obj["status"] = {**(obj.get("status") or {}), **status}
            obj["metadata"]["resourceVersion"] = self._next()
            self._store(key, obj, "MODIFIED")

    def delete(self, gv: str, plural: str, namespace: str, name: str) -> None:
        """Delete as kubectl would: objects with finalizers wait for them to be removed."""
        with self._changed:
            self._request_deletion((gv, plural, namespace, name))

    def stop(self) -> None:
        with self._changed:
            self._stopping = True
            self._changed.notify_all()

    # -- the HTTP side --

    def handle(self, request: Request) -> Response:
        self.requests.append(
            (request.method, request.full_path.rstrip("?"), request.headers.get("User-Agent", ""))
        )
        for fragment, code in self.refuse.items():
            if fragment in request.path:
                return _status(code, f"refused by the fake for {fragment}")
        discovery = _discovery(request.path)
        if discovery is not None:
            return _json(discovery)
        proxy = _PROXY.match(request.path)
        if proxy is not None:
            return self._proxy(request, proxy)
        match = _PATH.match(request.path)
        if match is None or (match["gv"], match["plural"]) not in RESOURCES:
            return _status(404, f"the server could not find the requested resource {request.path}")
        key = (match["gv"], match["plural"], match["ns"] or "", match["name"] or "")
        subresource = match["sub"]
        if request.method == "GET" and not key[3]:
            if request.args.get("watch") in ("true", "1"):
                return self._watch(request, key)
            return self._list(request, key)
        with self._changed:
            if request.method == "GET":
                obj = self.objects.get(key)
                return _json(obj) if obj is not None else _status(404, f'"{key[3]}" not found')
            if request.method == "POST":
                return self._create(request, key)
            if request.method == "DELETE":
                if key not in self.objects:
                    return _status(404, f'"{key[3]}" not found')
                return _json(self._request_deletion(key))
            if request.method == "PATCH":
                kind = request.headers.get("Content-Type", "").split(";")[0]
                if kind == "application/apply-patch+yaml":
                    return self._apply(request, key, subresource)
                return self._patch(request, key, kind, subresource)
        return _status(405, f"{request.method} is not served")

    def _proxy(self, request: Request, match: re.Match[str]) -> Response:
        """The request forwarded to one ready endpoint of the Service, streamed back."""
        self.proxied.append(
            (request.method, request.full_path.rstrip("?"), request.headers.get("Authorization"))
        )
        namespace, name = match["ns"], match["name"]
        with self._changed:
            service = copy.deepcopy(self.objects.get(("api/v1", "services", namespace, name)))
            pods = [
                copy.deepcopy(o)
                for (g, p, ns, _), o in self.objects.items()
                if (g, p, ns) == ("api/v1", "pods", namespace)
            ]
        if service is None:
            return _status(404, f'services "{name}" not found')
        wanted = match["port"] or ""
        ports = service.get("spec", {}).get("ports") or []
        port = next(
            (p for p in ports if p.get("name", "") == wanted or str(p.get("port")) == wanted), None
        )
        if port is None:
            return _status(503, f'no service port "{wanted}" found for service "{name}"')
        selector = service.get("spec", {}).get("selector") or {}
        endpoints = []
        for pod in pods:
            labels = pod.get("metadata", {}).get("labels") or {}
            status = pod.get("status") or {}
            ready = any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in status.get("conditions") or []
            )
            target = _target_port(port, pod)
            selected = bool(selector) and all(labels.get(k) == v for k, v in selector.items())
            if selected and ready and status.get("podIP") and target is not None:
                endpoints.append((status["podIP"], target))
        if not endpoints:
            return _status(503, f'no endpoints available for service "{name}"')
        host, target = random.choice(endpoints)
        scheme = match["scheme"] or "http"
        url = f"{scheme}://{host}:{target}{match['rest'] or '/'}"
        if request.query_string:
            url += "?" + request.query_string.decode()
        client = httpx.Client(timeout=httpx.Timeout(300.0, connect=10.0), trust_env=False)
        headers = {
            k: v for k, v in request.headers.items() if k.lower() in ("content-type", "accept")
        }
        upstream = client.send(
            client.build_request(request.method, url, content=request.get_data(), headers=headers),
            stream=True,
        )

        def relay() -> Iterator[bytes]:
            try:
                yield from upstream.iter_raw()
            finally:
                upstream.close()
                client.close()

        kind = upstream.headers.get("content-type", "application/octet-stream")
        return Response(
            relay(), status=upstream.status_code, content_type=kind, direct_passthrough=True
        )

    def _create(self, request: Request, key: Key) -> Response:
        body = json.loads(request.get_data(as_text=True))
        meta = body.setdefault("metadata", {})
        if "name" not in meta and "generateName" in meta:
            meta["name"] = f"{meta['generateName']}{next(self._uids):05d}"
        meta.setdefault("namespace", key[2])
        full = (key[0], key[1], meta["namespace"], meta["name"])
        if full in self.objects:
            return _status(409, f'"{meta["name"]}" already exists')
        self._stamp(body, None)
        self._store(full, body, "ADDED")
        return _json(body, 201)

    def _apply(self, request: Request, key: Key, subresource: str | None) -> Response:
        manager = request.args.get("fieldManager")
        if not manager:
            return _status(422, "fieldManager is required for apply requests")
        body = _stringify_quantities(yaml.safe_load(request.get_data(as_text=True)))
        kind, _ = RESOURCES[(key[0], key[1])]
        if body.get("kind") != kind or body.get("metadata", {}).get("name") != key[3]:
            return _status(400, "the body's kind and name do not match the path")
        body["metadata"]["namespace"] = key[2]
        body.pop("status", None)
        current = self.objects.get(key)
        owners = dict(self.owners.get(key, {}))
        conflicts = _conflicts(current, body, owners, manager)
        if conflicts and request.args.get("force") != "true":
            return _conflict_status(conflicts, body["apiVersion"])
        merged = _merge(current, body, manager, owners)
        owners = {p: m for p, m in owners.items() if m != manager}
        owners.update(dict.fromkeys(_leaves(body), manager))
        merged["metadata"]["managedFields"] = _managed_fields(owners, body["apiVersion"])
        if current is not None and _content(current) == _content(merged):
            return _json(current)
        if request.args.get("dryRun") == "All":
            return _json(merged)
        self._stamp(merged, current)
        self.owners[key] = owners
        self._store(key, merged, "MODIFIED" if current else "ADDED")
        return _json(merged, 201 if current is None else 200)

    def _patch(
        self, request: Request, key: Key, content_type: str, subresource: str | None
    ) -> Response:
        current = self.objects.get(key)
        if current is None:
            return _status(404, f'"{key[3]}" not found')
        patch = json.loads(request.get_data(as_text=True))
        if content_type == "application/merge-patch+json":
            patched = _merge_patch(copy.deepcopy(current), patch)
        elif content_type == "application/json-patch+json":
            try:
                patched = jsonpatch.apply_patch(copy.deepcopy(current), patch)
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
                return _status(422, f"the JSON patch does not apply: {exc}")
        else:
            return _status(415, f"unsupported patch type {content_type}")
        _, has_status = RESOURCES[(key[0], key[1])]
        if has_status and subresource == "status":
            patched = {**current, "status": patched.get("status")}
        elif has_status:
            patched["status"] = current.get("status")
        if patched.get("status") is None:
            patched.pop("status", None)
        if _content(current) == _content(patched):
            return _json(current)
        self._stamp(patched, current)
        self._store(key, patched, "MODIFIED")
        meta = patched["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._delete(key)  # the last finalizer is gone: the deletion completes
        return _json(patched)

    def _list(self, request: Request, key: Key) -> Response:
        kind, _ = RESOURCES[(key[0], key[1])]
        with self._changed:
            items = self._matching(request, key)
            version = str(self._version)
        return _json(
            {
                "kind": f"{kind}List",
                "apiVersion": key[0].removeprefix("api/").removeprefix("apis/"),
                "metadata": {"resourceVersion": version},
                "items": items,
            }
        )

    def _watch(self, request: Request, key: Key) -> Response:
        since = int(request.args.get("resourceVersion") or 0)
        timeout = float(request.args.get("timeoutSeconds") or 300)

        def stream() -> Iterator[bytes]:
            seen = since
            if since == 0:
                with self._changed:
                    initial = self._matching(request, key)
                    seen = self._version
                for obj in initial:
                    yield (json.dumps({"type": "ADDED", "object": obj}) + "\n").encode()
            waited = 0.0
            while waited < timeout:
                with self._changed:
                    fresh = [
                        h
                        for h in self.history
                        if h[0] > seen and _same(h[1], key) and _selected(request, h[3])
                    ]
                    if not fresh and not self._stopping:
                        self._changed.wait(0.5)
                        waited += 0.5
                    stopping = self._stopping
                for version, _, kind, obj in fresh:
                    seen = version
                    yield (json.dumps({"type": kind, "object": obj}) + "\n").encode()
                if stopping:
                    return

        return Response(stream(), content_type="application/json", direct_passthrough=True)

    # -- bookkeeping --

    def _matching(self, request: Request, key: Key) -> list[dict[str, Any]]:
        return [
            copy.deepcopy(obj)
            for k, obj in sorted(self.objects.items())
            if _same(k, key) and _selected(request, obj)
        ]

    def _stamp(self, obj: dict[str, Any], current: dict[str, Any] | None) -> None:
        meta = obj.setdefault("metadata", {})
        meta["resourceVersion"] = self._next()
        if current is None:
            meta["uid"] = f"uid-{next(self._uids):04d}-{meta['name']}"
            meta["creationTimestamp"] = "2026-01-01T00:00:00Z"
            meta["generation"] = 1
            return
        cur_meta = current["metadata"]
        meta["uid"] = cur_meta["uid"]
        meta["creationTimestamp"] = cur_meta.get("creationTimestamp")
        meta["generation"] = cur_meta.get("generation", 1) + (_spec(obj) != _spec(current))

    def _store(self, key: Key, obj: dict[str, Any], kind: str) -> None:
        self.objects[key] = obj
        self.history.append(
            (int(obj["metadata"]["resourceVersion"]), key, kind, copy.deepcopy(obj))
        )
        self._changed.notify_all()

    def _request_deletion(self, key: Key) -> dict[str, Any]:
        obj = self.objects[key]
        if not obj["metadata"].get("finalizers"):
            return self._delete(key)
        if not obj["metadata"].get("deletionTimestamp"):
            obj = copy.deepcopy(obj)
            obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:01Z"
            obj["metadata"]["resourceVersion"] = self._next()
            self._store(key, obj, "MODIFIED")
        return copy.deepcopy(obj)

    def _delete(self, key: Key) -> dict[str, Any]:
        obj = self.objects.pop(key)
        self.owners.pop(key, None)
        obj["metadata"]["resourceVersion"] = self._next()
        self.history.append(
            (int(obj["metadata"]["resourceVersion"]), key, "DELETED", copy.deepcopy(obj))
        )
        uid = obj["metadata"]["uid"]
        for dependent, other in list(self.objects.items()):  # the garbage collector
            if dependent in self.objects and any(
                r.get("uid") == uid for r in other["metadata"].get("ownerReferences") or []
            ):
                self._delete(dependent)
        self._changed.notify_all()
        return obj

    def _next(self) -> str:
        self._version += 1
        return str(self._version)


class ApiServer:
    """A FakeCluster served on 127.0.0.1 by a threaded werkzeug server."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster

        def app(environ: Any, start_response: Any) -> Any:
            return cluster.handle(Request(environ))(environ, start_response)

        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        self._server = make_server("127.0.0.1", 0, app, threaded=True)
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.cluster.stop()
        self._server.shutdown()
        self._thread.join(5)


def kubeconfig_text(server: str, namespace: str = "default") -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": server}}],
            "users": [{"name": "fake", "user": {"token": "fake-token"}}],
            "contexts": [
                {
                    "name": "fake",
                    "context": {"cluster": "fake", "user": "fake", "namespace": namespace},
                }
            ],
            "current-context": "fake",
        }
    )


def _spec(obj: dict[str, Any]) -> str:
    """Everything but metadata and status: what metadata.generation counts changes of."""
    return json.dumps(
        {k: v for k, v in obj.items() if k not in ("metadata", "status")}, sort_keys=True
    )


def _target_port(port: dict[str, Any], pod: dict[str, Any]) -> int | None:
    """The Service port's targetPort on this pod: a number, or the named container port."""
    target = port.get("targetPort", port.get("port"))
    if isinstance(target, int):
        return target
    for container in pod.get("spec", {}).get("containers") or []:
        for declared in container.get("ports") or []:
            if declared.get("name") == target:
                return int(declared["containerPort"])
    return None


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return patch
    if not isinstance(target, dict):
        target = {}
    for k, v in patch.items():
        if v is None:
            target.pop(k, None)
        else:
            target[k] = _merge_patch(target.get(k), v)
    return target


def _same(key: Key, request_key: Key) -> bool:
    return key[:2] == request_key[:2] and (not request_key[2] or key[2] == request_key[2])


def _selected(request: Request, obj: dict[str, Any]) -> bool:
    text = request.args.get("labelSelector")
    if not text:
        return True
    labels = obj.get("metadata", {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in (part.split("=", 1) for part in text.split(",")))


def _discovery(path: str) -> dict[str, Any] | None:
    if path == "/version":
        return {"major": "1", "minor": "33", "gitVersion": "v1.33.0", "platform": "linux/amd64"}
    if path == "/api":
        return {"kind": "APIVersions", "versions": ["v1"]}
    groups = sorted({gv.removeprefix("apis/") for gv, _ in RESOURCES if gv.startswith("apis/")})
    if path == "/apis":
        return {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [
                {
                    "name": gv.split("/")[0],
                    "versions": [{"groupVersion": gv, "version": gv.split("/")[1]}],
                    "preferredVersion": {"groupVersion": gv, "version": gv.split("/")[1]},
                }
                for gv in groups
            ],
        }
    gv = path.strip("/")
    if not any(g == gv for g, _ in RESOURCES):
        return None
    resources = []
    for (g, plural), (kind, has_status) in RESOURCES.items():
        if g != gv:
            continue
        verbs = ["create", "delete", "get", "list", "patch", "update", "watch"]
        namespaced = plural not in CLUSTER_SCOPED
        resources.append(
            {
                "name": plural,
                "singularName": kind.lower(),
                "kind": kind,
                "namespaced": namespaced,
                "verbs": verbs,
            }
        )
        if has_status:
            resources.append(
                {
                    "name": f"{plural}/status",
                    "singularName": "",
                    "kind": kind,
                    "namespaced": namespaced,
                    "verbs": ["get", "patch", "update"],
                }
            )
    return {
        "kind": "APIResourceList",
        "groupVersion": gv.removeprefix("api/").removeprefix("apis/"),
        "resources": resources,
    }
