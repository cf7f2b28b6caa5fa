"""A loopback fake of the Kubernetes API for apply/status/delete tests (no real API server can
run here; shared/reference/feasibility_k8s.md §4).

It serves the real paths the `kubernetes` client uses: discovery (/version, /apis, /api/v1,
/apis/<group>/<version>), GET/LIST (labelSelector, fieldSelector), DELETE, pod logs, and PATCH with
server-side apply semantics that matter here: Content-Type application/apply-patch+yaml (415
otherwise), a fieldManager (422 otherwise), dryRun=All persists nothing, quantities come back as
strings, resourceVersion changes only when the object changes, managedFields record the manager.
Field ownership: each leaf field (a list counts as one) belongs to the manager that set it last;
applying a different value to a field another manager owns is a 409 Conflict naming the manager
and the field (a FieldManagerConflict cause, as the API server reports it), unless `force=true`,
which takes the field over. `update()` changes a field as another tool would (kubectl edit).
A custom resource is checked against its kind's referee (tests/unit/emitters/referees.py: the
vendored CRD or our transcription of it): what the referee refuses is a 422 Invalid naming each
field, as the API server answers; the kinds and versions served here are the CRDs' own
(test_platform_apply.py checks the table below against them).
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from typing import Any

import yaml
from werkzeug import Request, Response

#: (group/version path prefix, plural) -> (kind, namespaced)
RESOURCES: dict[tuple[str, str], tuple[str, bool]] = {
    ("api/v1", "configmaps"): ("ConfigMap", True),
    ("api/v1", "services"): ("Service", True),
    ("api/v1", "persistentvolumeclaims"): ("PersistentVolumeClaim", True),
    ("api/v1", "pods"): ("Pod", True),
    ("api/v1", "events"): ("Event", True),
    ("apis/apps/v1", "deployments"): ("Deployment", True),
    ("apis/leaderworkerset.x-k8s.io/v1", "leaderworkersets"): ("LeaderWorkerSet", True),
    # The platforms' custom resources (render/apply --platform), as their CRDs define them.
    ("apis/serving.kserve.io/v1alpha2", "llminferenceservices"): ("LLMInferenceService", True),
    ("apis/serving.kserve.io/v1alpha1", "llminferenceservices"): ("LLMInferenceService", True),
    ("apis/serving.kserve.io/v1beta1", "inferenceservices"): ("InferenceService", True),
    ("apis/kaito.sh/v1beta1", "workspaces"): ("Workspace", True),
    ("apis/nvidia.com/v1beta1", "dynamographdeployments"): ("DynamoGraphDeployment", True),
    ("apis/inference.networking.k8s.io/v1", "inferencepools"): ("InferencePool", True),
    ("apis/gateway.networking.k8s.io/v1", "httproutes"): ("HTTPRoute", True),
}
_PATH = re.compile(
    r"^/(?P<gv>api/v1|apis/[^/]+/[^/]+)/namespaces/(?P<ns>[^/]+)/(?P<plural>[^/]+)"
    r"(?:/(?P<name>[^/]+))?(?:/(?P<sub>log))?$"
)


@dataclass
class FakeKube:
    """In-memory objects keyed by (group/version, plural, namespace, name)."""

    lws_installed: bool = True
    missing_groups: set[str] = field(default_factory=set)
    """API groups (e.g. "kaito.sh") whose CRDs are not installed: absent from discovery."""
    objects: dict[tuple[str, str, str, str], dict[str, Any]] = field(default_factory=dict)
    logs: dict[str, str] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)
    refuse: dict[str, int] = field(default_factory=dict)
    """Path substring -> HTTP status to answer with (e.g. 403 for an RBAC test)."""
    owners: dict[tuple[str, str, str, str], dict[tuple[str, ...], str]] = field(
        default_factory=dict
    )
    """Object key -> leaf field path -> the manager that owns it."""
    validate_crds: bool = True
    """Refuse a custom resource its CRD's schema refuses (422), as the API server does."""
    _version: int = 100

    def add(self, gv: str, plural: str, obj: dict[str, Any]) -> None:
        """Put an object in the store as if someone else created it."""
        meta = obj["metadata"]
        meta.setdefault("namespace", "default")
        meta.setdefault("resourceVersion", self._next_version())
        self.objects[(gv, plural, meta["namespace"], meta["name"])] = obj

    def update(self, key: tuple[str, str, str, str], path: str, value: Any, manager: str) -> None:
        """Change one field of a stored object as another tool would (an Update by `manager`)."""
        obj = self.objects[key]
        parts = tuple(path.strip(".").split("."))
        node = obj
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
        owners = self.owners.setdefault(key, {})
        owners[parts] = manager
        obj["metadata"]["managedFields"] = _managed_fields(owners, obj["apiVersion"])
        obj["metadata"]["resourceVersion"] = self._next_version()

    def handle(self, request: Request) -> Response:
        self.requests.append((request.method, request.full_path.rstrip("?")))
        for fragment, status in self.refuse.items():
            if fragment in request.path:
                return _status(status, f"refused by the fake for {fragment}")
        discovery = self._discovery(request.path)
        if discovery is not None:
            return _json(discovery)
        match = _PATH.match(request.path)
        if match is None or (match["gv"], match["plural"]) not in RESOURCES:
            return _status(404, f"the server could not find the requested resource {request.path}")
        if match["gv"].startswith("apis/leaderworkerset") and not self.lws_installed:
            return _status(404, "the server could not find the requested resource")
        key = (match["gv"], match["plural"], match["ns"], match["name"] or "")
        if match["sub"] == "log":
            return Response(self.logs.get(match["name"], ""), content_type="text/plain")
        if request.method == "PATCH":
            return self._apply(request, key)
        if request.method == "DELETE":
            return self._delete(key)
        if match["name"]:
            obj = self.objects.get(key)
            return _json(obj) if obj is not None else _status(404, f'"{key[3]}" not found')
        return self._list(request, key)

    # -- handlers --

    def _apply(self, request: Request, key: tuple[str, str, str, str]) -> Response:
        if request.headers.get("Content-Type", "").split(";")[0] != "application/apply-patch+yaml":
            return _status(415, "server-side apply needs Content-Type application/apply-patch+yaml")
        manager = request.args.get("fieldManager")
        if not manager:
            return _status(422, "fieldManager is required for apply requests")
        body = yaml.safe_load(request.get_data(as_text=True))
        kind, _ = RESOURCES[(key[0], key[1])]
        if body.get("kind") != kind or body.get("metadata", {}).get("name") != key[3]:
            return _status(400, "the body's kind and name do not match the path")
        invalid = self._invalid(body) if self.validate_crds else None
        if invalid is not None:
            return invalid
        body = _stringify_quantities(copy.deepcopy(body))
        body["metadata"]["namespace"] = key[2]
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
            return _json(current)  # unchanged: same resourceVersion, nothing written
        merged["metadata"]["resourceVersion"] = self._next_version()
        if request.args.get("dryRun") == "All":
            return _json(merged)
        self.objects[key] = merged
        self.owners[key] = owners
        return _json(merged, 201 if current is None else 200)

    def _invalid(self, body: dict[str, Any]) -> Response | None:
        """422 Invalid when the kind's referee refuses the object; None when it validates or
        is a built-in kind (or a kind with no referee)."""
        from tests.unit.emitters.referees import SchemaMissing, crd_errors

        group = str(body.get("apiVersion", "")).rpartition("/")[0]
        if group in ("", "apps", "leaderworkerset.x-k8s.io"):
            return None
        try:
            errors = crd_errors(body)
        except SchemaMissing:
            return None
        if not errors:
            return None
        name = body["metadata"]["name"]
        causes = [
            {"reason": "FieldValueInvalid", "field": e.split(":", 1)[0], "message": e}
            for e in errors
        ]
        document = {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "message": f'{body["kind"]}.{group} "{name}" is invalid: ' + "; ".join(errors),
            "reason": "Invalid",
            "details": {"name": name, "group": group, "kind": body["kind"], "causes": causes},
            "code": 422,
        }
        return _json(document, 422)

    def _delete(self, key: tuple[str, str, str, str]) -> Response:
        if self.objects.pop(key, None) is None:
            return _status(404, f'"{key[3]}" not found')
        return _json({"kind": "Status", "apiVersion": "v1", "status": "Success"})

    def _list(self, request: Request, key: tuple[str, str, str, str]) -> Response:
        labels = _selector(request.args.get("labelSelector"))
        fields = _selector(request.args.get("fieldSelector"))
        items = [
            obj
            for (gv, plural, ns, _), obj in sorted(self.objects.items())
            if (gv, plural, ns) == key[:3]
            and all(obj["metadata"].get("labels", {}).get(k) == v for k, v in labels.items())
            and all(_field(obj, k) == v for k, v in fields.items())
        ]
        kind, _ = RESOURCES[(key[0], key[1])]
        api_version = key[0].removeprefix("api/").removeprefix("apis/")
        return _json(
            {
                "kind": f"{kind}List",
                "apiVersion": api_version,
                "metadata": {"resourceVersion": str(self._version)},
                "items": items,
            }
        )

    def _discovery(self, path: str) -> dict[str, Any] | None:
        if path == "/version":
            return {"major": "1", "minor": "33", "gitVersion": "v1.33.0", "platform": "linux/amd64"}
        if path == "/api":
            return {"kind": "APIVersions", "versions": ["v1"]}
        if path == "/apis":
            groups = sorted({gv.removeprefix("apis/") for gv, _ in RESOURCES if gv != "api/v1"})
            if not self.lws_installed:
                groups.remove("leaderworkerset.x-k8s.io/v1")
            groups = [gv for gv in groups if gv.split("/")[0] not in self.missing_groups]
            return {
                "kind": "APIGroupList",
                "apiVersion": "v1",
                "groups": [
                    {
                        "name": name,
                        "versions": [
                            {"groupVersion": gv, "version": gv.split("/")[1]}
                            for gv in groups
                            if gv.split("/")[0] == name
                        ],
                        "preferredVersion": next(
                            {"groupVersion": gv, "version": gv.split("/")[1]}
                            for gv in groups
                            if gv.split("/")[0] == name
                        ),
                    }
                    for name in sorted({gv.split("/")[0] for gv in groups})
                ],
            }
        gv = path.strip("/")
        if gv.removeprefix("apis/").split("/")[0] in self.missing_groups:
            return None
        if any(g == gv for g, _ in RESOURCES):
            if gv.startswith("apis/leaderworkerset") and not self.lws_installed:
                return None
            return {
                "kind": "APIResourceList",
                "groupVersion": gv.removeprefix("api/").removeprefix("apis/"),
                "resources": [
                    {
                        "name": plural,
                        "singularName": kind.lower(),
                        "kind": kind,
                        "namespaced": namespaced,
                        "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
                    }
                    for (g, plural), (kind, namespaced) in RESOURCES.items()
                    if g == gv
                ],
            }
        return None

    def _next_version(self) -> str:
        self._version += 1
        return str(self._version)


def _merge(
    current: dict[str, Any] | None,
    body: dict[str, Any],
    manager: str,
    owners: dict[tuple[str, ...], str],
) -> dict[str, Any]:
    """The applied fields are set; fields this manager set before and no longer applies are
    removed; fields other managers own, status and uid stay."""
    if current is None:
        merged = copy.deepcopy(body)
        merged["metadata"]["uid"] = f"uid-{body['kind'].lower()}-{body['metadata']['name']}"
    else:
        merged = copy.deepcopy(current)
        applied = set(_leaves(body))
        for path, owner in owners.items():
            if owner == manager and path not in applied:
                _remove(merged, path)
        for path in applied:
            _set(merged, path, copy.deepcopy(_at(body, path)))
    return merged


def _managed_fields(owners: dict[tuple[str, ...], str], api_version: str) -> list[dict[str, Any]]:
    """metadata.managedFields: one entry per manager with the fields it owns (FieldsV1)."""
    entries: dict[str, dict[str, Any]] = {}
    for path, manager in sorted(owners.items()):
        fields = entries.setdefault(manager, {})
        for part in path:
            fields = fields.setdefault(f"f:{part}", {})
    return [
        {
            "manager": manager,
            "operation": "Apply" if manager == "specdeploy" else "Update",
            "apiVersion": api_version,
            "fieldsType": "FieldsV1",
            "fieldsV1": fields,
        }
        for manager, fields in entries.items()
    ]


def _leaves(node: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Leaf field paths of an applied body (lists are atomic); metadata name and namespace,
    apiVersion and kind identify the object rather than being owned."""
    if not isinstance(node, dict) or not node:
        return [prefix]
    out: list[tuple[str, ...]] = []
    for key, value in node.items():
        path = (*prefix, key)
        if path in (("apiVersion",), ("kind",), ("metadata", "name"), ("metadata", "namespace")):
            continue
        out += _leaves(value, path)
    return out


def _set(obj: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for part in path[:-1]:
        obj = obj.setdefault(part, {})
    obj[path[-1]] = value


def _remove(obj: dict[str, Any], path: tuple[str, ...]) -> None:
    parent = _at(obj, path[:-1])
    if isinstance(parent, dict):
        parent.pop(path[-1], None)


def _at(obj: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        if not isinstance(obj, dict) or part not in obj:
            return None
        obj = obj[part]
    return obj


def _conflicts(
    current: dict[str, Any] | None,
    body: dict[str, Any],
    owners: dict[tuple[str, ...], str],
    manager: str,
) -> list[tuple[str, tuple[str, ...]]]:
    """(other manager, path) for each field the apply changes that another manager owns."""
    if current is None:
        return []
    return [
        (owners[path], path)
        for path in _leaves(body)
        if owners.get(path, manager) != manager and _at(current, path) != _at(body, path)
    ]


def _conflict_status(conflicts: list[tuple[str, tuple[str, ...]]], api_version: str) -> Response:
    causes = [
        {
            "reason": "FieldManagerConflict",
            "message": f'conflict with "{owner}" using {api_version}',
            "field": "." + ".".join(path),
        }
        for owner, path in conflicts
    ]
    message = f"Apply failed with {len(causes)} conflict(s): " + "; ".join(
        f"{c['message']}: {c['field']}" for c in causes
    )
    document = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": "Conflict",
        "details": {"causes": causes},
        "code": 409,
    }
    return _json(document, 409)


def _content(obj: dict[str, Any]) -> str:
    meta = {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}
    return json.dumps({**obj, "metadata": meta}, sort_keys=True)


def _stringify_quantities(node: Any, parent: str = "") -> Any:
    """A real API server returns resource quantities as strings (feasibility_k8s.md §4)."""
    if isinstance(node, dict):
        quantities = parent in ("limits", "requests")
        return {
            k: str(v) if quantities and isinstance(v, int | float) else _stringify_quantities(v, k)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_stringify_quantities(v, parent) for v in node]
    return node


def _selector(text: str | None) -> dict[str, str]:
    if not text:
        return {}
    return dict(part.split("=", 1) for part in text.split(","))


def _field(obj: dict[str, Any], dotted: str) -> Any:
    node: Any = obj
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def _json(document: Any, status: int = 200) -> Response:
    return Response(json.dumps(document), status=status, content_type="application/json")


def _status(code: int, message: str) -> Response:
    reason = {400: "BadRequest", 403: "Forbidden", 404: "NotFound", 415: "UnsupportedMediaType"}
    document = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": reason.get(code, "Invalid"),
        "code": code,
    }
    return _json(document, code)
