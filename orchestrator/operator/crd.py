"""The `SpeculativeDeployment` CustomResourceDefinition, generated from the profile schema.

The resource carries the profile under `spec` (engine, target, proposer, ... as in a profile
file; apiVersion `specdeploy.io/v1`), and the operator writes `status`. Its `spec` schema is
the profile's JSON Schema (`orchestrator.profile.docs.documented_json_schema`) rewritten into a
Kubernetes structural schema: `$ref`s inlined, `anyOf [X, null]` as `nullable`, `const` as
`enum`, numeric `exclusiveMinimum` as OpenAPI 3.0's boolean form, no `additionalProperties:
false` (the API server prunes unknown fields; the operator's pydantic load refuses them with a
message). Rules: https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#specifying-a-structural-schema
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

from orchestrator.profile.docs import documented_json_schema
from orchestrator.profile.schema import Profile

GROUP: Final = "specdeploy.io"
VERSION: Final = "v1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
KIND: Final = "SpeculativeDeployment"
PLURAL: Final = "speculativedeployments"
SINGULAR: Final = "speculativedeployment"
SHORT_NAMES: Final = ("specdeploy",)
#: A resource's keys that are the object's, not the profile's: they stay beside `spec`.
_OBJECT_KEYS: Final = ("apiVersion", "kind", "metadata", "status")

#: OpenAPI v3 keywords a structural schema may use (besides x-kubernetes-* extensions).
ALLOWED_KEYWORDS: Final = frozenset(
    {
        "type", "format", "title", "description", "default", "maximum", "exclusiveMaximum",
        "minimum", "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems",
        "minItems", "uniqueItems", "multipleOf", "enum", "maxProperties", "minProperties",
        "required", "items", "allOf", "oneOf", "anyOf", "not", "properties",
        "additionalProperties", "nullable", "example", "externalDocs",
    }
)  # fmt: skip
#: Extensions the API server knows; any other x-kubernetes-* key is refused.
KUBERNETES_EXTENSIONS: Final = frozenset(
    {
        "x-kubernetes-preserve-unknown-fields", "x-kubernetes-embedded-resource",
        "x-kubernetes-int-or-string", "x-kubernetes-list-type", "x-kubernetes-list-map-keys",
        "x-kubernetes-map-type", "x-kubernetes-validations",
    }
)  # fmt: skip
_DROPPED: Final = frozenset({"title", "default", "$defs"})
#: In a junctor (anyOf, allOf, oneOf, not) these may not appear: they belong on the outer node.
_NOT_IN_JUNCTORS: Final = frozenset(
    {"type", "additionalProperties", "description", "default", "nullable", *KUBERNETES_EXTENSIONS}
)
_JUNCTORS: Final = ("anyOf", "allOf", "oneOf", "not")

PRINTER_COLUMNS: Final = (
    {
        "name": "Ready",
        "type": "string",
        "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
        "description": "Whether the twins serve (the Ready condition).",
    },
    {"name": "Method", "type": "string", "jsonPath": ".spec.proposer.method"},
    {
        "name": "Acceptance",
        "type": "number",
        "jsonPath": ".status.acceptance.meanLength",
        "description": "Mean acceptance length (accepted drafts + 1 per verify step), smoothed.",
    },
    {
        "name": "Traffic",
        "type": "string",
        "jsonPath": ".status.traffic.share",
        "description": "Share of traffic the speculative twin receives.",
    },
    {"name": "Verdict", "type": "string", "jsonPath": ".status.verdict"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
)


def custom_resource_definition() -> dict[str, Any]:
    """The CRD object, ready to apply. The operator chart installs it as a template (its file
    is crd/ in the chart, `templates/crd.yaml` includes it), so `helm upgrade` updates it as it
    does every other object, which Helm never does for crds/; `helm uninstall` keeps it (the
    resource policy), so uninstalling the operator deletes no tenant's resources."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{PLURAL}.{GROUP}",
            "annotations": {"helm.sh/resource-policy": "keep"},
        },
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": KIND,
                "listKind": f"{KIND}List",
                "plural": PLURAL,
                "singular": SINGULAR,
                "shortNames": list(SHORT_NAMES),
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [dict(c) for c in PRINTER_COLUMNS],
                    "schema": {"openAPIV3Schema": resource_schema()},
                }
            ],
        },
    }


def as_resource(profile: Mapping[str, Any]) -> dict[str, Any]:
    """A profile document as the custom resource that deploys it: apiVersion specdeploy.io/v1,
    its metadata, and its other fields under `spec` (a resource is returned as it is)."""
    if profile.get("apiVersion") == API_VERSION and "spec" in profile:
        return copy.deepcopy(dict(profile))
    rest = {k: copy.deepcopy(v) for k, v in profile.items() if k not in _OBJECT_KEYS}
    resource: dict[str, Any] = {"apiVersion": API_VERSION, "kind": KIND}
    if "metadata" in profile:
        resource["metadata"] = copy.deepcopy(profile["metadata"])
    resource["spec"] = rest
    if "status" in profile:
        resource["status"] = copy.deepcopy(profile["status"])
    return resource


def resource_schema() -> dict[str, Any]:
    """The structural schema of a SpeculativeDeployment: the profile's fields under `spec`, plus
    `status`."""
    profile = documented_json_schema(Profile)
    defs = profile.get("$defs", {})
    schema = structural(profile, defs)
    properties = dict(schema["properties"])
    name = properties.pop("metadata")["properties"]["name"]
    for key in ("apiVersion", "kind"):
        properties.pop(key)
    spec = {
        "type": "object",
        "description": "The deployment, as a specdeploy profile spells it (the same fields, "
        "without apiVersion, kind and metadata).",
        "properties": properties,
        "required": [r for r in schema["required"] if r in properties],
    }
    return {
        "type": "object",
        "description": "A speculative deployment: a specdeploy profile under spec, kept deployed "
        "and tuned by `specdeploy operator`, which writes status.",
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            # Only metadata.name (and generateName) may be restricted; the namespace is the
            # object's own.
            "metadata": {
                "type": "object",
                "properties": {"name": {"type": "string", "maxLength": name["maxLength"]}},
            },
            "spec": spec,
            "status": status_schema(),
        },
    }


def structural(node: Any, defs: dict[str, Any]) -> Any:
    """One JSON Schema node as a structural OpenAPI v3 node."""
    if isinstance(node, list):
        return [structural(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    node = dict(node)
    while "$ref" in node or "anyOf" in node:
        if "anyOf" in node:
            node = _nullable(node)
        if "$ref" in node:
            target = defs[node.pop("$ref").rsplit("/", 1)[-1]]
            node = {**target, **node}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED or (key == "additionalProperties" and value is False):
            continue
        if key == "const":
            out["enum"] = [value]
        elif key in ("exclusiveMinimum", "exclusiveMaximum") and not isinstance(value, bool):
            out[key.replace("exclusive", "").lower()] = value
            out[key] = True
        elif key == "properties":
            out[key] = {name: structural(prop, defs) for name, prop in value.items()}
        else:
            out[key] = structural(value, defs)
    return out


def _nullable(node: dict[str, Any]) -> dict[str, Any]:
    """`anyOf: [X, {type: null}]` (pydantic's `X | None`) as X with `nullable: true`."""
    options = [o for o in node["anyOf"] if o != {"type": "null"}]
    if len(options) != 1 or len(options) == len(node["anyOf"]):
        raise ValueError(f"the profile schema has an anyOf the CRD cannot express: {node}")
    rest = {k: v for k, v in node.items() if k != "anyOf"}
    return {**options[0], **rest, "nullable": True}


def status_schema() -> dict[str, Any]:
    """What the operator writes; listed so `kubectl explain` and printer columns know it. Further
    fields (the loop's memory) are kept as written."""
    condition = {
        "type": "object",
        "required": ["type", "status"],
        "properties": {
            "type": {"type": "string"},
            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
            "reason": {"type": "string"},
            "message": {"type": "string"},
            "lastTransitionTime": {"type": "string", "format": "date-time"},
            "observedGeneration": {"type": "integer"},
        },
    }
    return {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
        "properties": {
            "observedGeneration": {"type": "integer"},
            "verdict": {"type": "string"},
            "conditions": {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["type"],
                "items": condition,
            },
            "acceptance": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "properties": {"meanLength": {"type": "number"}, "rate": {"type": "number"}},
            },
            "traffic": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "properties": {"active": {"type": "string"}, "share": {"type": "string"}},
            },
        },
    }


def structural_problems(schema: dict[str, Any]) -> list[str]:
    """Why `schema` is not a structural schema the API server accepts (empty when it is)."""
    problems: list[str] = []
    _check(schema, "", problems, junctor=False)
    metadata = schema.get("properties", {}).get("metadata")
    if metadata is not None:
        extra = set(metadata.get("properties", {})) - {"name", "generateName"}
        if extra or set(metadata) - {"type", "properties"}:
            problems.append("metadata: only metadata.name and generateName may be restricted")
    return problems


def _check(node: Any, path: str, problems: list[str], *, junctor: bool) -> None:
    if not isinstance(node, dict):
        problems.append(f"{path or '(root)'}: a schema must be an object")
        return
    where = path or "(root)"
    for key in node:
        if key.startswith("x-kubernetes-"):
            if key not in KUBERNETES_EXTENSIONS:
                problems.append(f"{where}: unknown extension {key}")
        elif key not in ALLOWED_KEYWORDS:
            problems.append(f"{where}: {key} is not allowed in a structural schema")
    if junctor:
        problems += [
            f"{where}: {k} may not appear inside anyOf/allOf/oneOf/not"
            for k in node
            if k in _NOT_IN_JUNCTORS
        ]
    elif "type" not in node and not (
        node.get("x-kubernetes-int-or-string") or node.get("x-kubernetes-preserve-unknown-fields")
    ):
        problems.append(f"{where}: has no type")
    if "properties" in node and "additionalProperties" in node:
        problems.append(f"{where}: properties and additionalProperties are mutually exclusive")
    if node.get("type") == "array" and not isinstance(node.get("items"), dict):
        problems.append(f"{where}: an array needs one items schema")
    for key in ("exclusiveMinimum", "exclusiveMaximum"):
        if key in node and not isinstance(node[key], bool):
            problems.append(f"{where}: {key} must be a boolean (OpenAPI 3.0)")
    _check_extensions(node, where, problems)
    for name, prop in (node.get("properties") or {}).items():
        _check(prop, f"{path}.{name}", problems, junctor=junctor)
    if isinstance(node.get("items"), dict):
        _check(node["items"], f"{path}[]", problems, junctor=junctor)
    if isinstance(node.get("additionalProperties"), dict):
        _check(node["additionalProperties"], f"{path}.*", problems, junctor=junctor)
    for key in _JUNCTORS:
        branches = node.get(key)
        for branch in branches if isinstance(branches, list) else [branches] if branches else []:
            _check(branch, f"{path}({key})", problems, junctor=True)


def _check_extensions(node: dict[str, Any], where: str, problems: list[str]) -> None:
    list_type = node.get("x-kubernetes-list-type")
    if list_type is not None and list_type not in ("atomic", "set", "map"):
        problems.append(f"{where}: x-kubernetes-list-type {list_type!r} is not atomic/set/map")
    if list_type is not None and node.get("type") != "array":
        problems.append(f"{where}: x-kubernetes-list-type needs type: array")
    if list_type == "map":
        keys = node.get("x-kubernetes-list-map-keys") or []
        required = set((node.get("items") or {}).get("required") or [])
        if not keys or not set(keys) <= required:
            problems.append(f"{where}: list-map keys must be required fields of the items")
    if "x-kubernetes-preserve-unknown-fields" in node and (
        node["x-kubernetes-preserve-unknown-fields"] is not True
    ):
        problems.append(f"{where}: x-kubernetes-preserve-unknown-fields must be true")
    if node.get("x-kubernetes-embedded-resource") and node.get("type") != "object":
        problems.append(f"{where}: x-kubernetes-embedded-resource needs type: object")
    if "nullable" in node and not isinstance(node["nullable"], bool):
        problems.append(f"{where}: nullable must be a boolean")


def as_json_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The structural schema as plain JSON Schema (nullable -> a null type, boolean exclusive
    bounds -> numeric, unknown fields refused as `kubectl apply`'s strict field validation
    does), to validate documents with `jsonschema` as the API server would."""
    out: dict[str, Any] = _json_schema(schema)
    out["properties"]["metadata"].pop("additionalProperties", None)  # labels, namespace, ...
    return out


def _json_schema(node: Any) -> Any:
    if isinstance(node, list):
        return [_json_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _json_schema(v) for k, v in node.items() if not k.startswith("x-kubernetes-")}
    if out.pop("nullable", False) and "type" in out:
        out["type"] = [out["type"], "null"]
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
    for key, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if out.get(key) is True:
            out[key] = out.pop(bound)
        elif out.get(key) is False:
            out.pop(key)
    if "properties" in out and node.get("x-kubernetes-preserve-unknown-fields") is not True:
        out.setdefault("additionalProperties", False)
    return copy.deepcopy(out)
