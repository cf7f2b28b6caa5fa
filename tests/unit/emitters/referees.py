"""The platforms' published schemas as referees: each CRD's `openAPIV3Schema` turned into a JSON
Schema that judges an object the way the API server's structural validation does, and the
vllm-stack chart's values.schema.json.

The files are the platforms' own, unedited, at the release commits listed in
tests/fixtures/platforms/README.md. They are looked for, per platform directory, in
$SPECDEPLOY_REFEREE_SCHEMAS, then tests/fixtures/platforms/, then ../shared/referees/platforms/
(the shared/ that CI lays beside the clone).

A CRD schema becomes a JSON Schema (draft 4, which OpenAPI 3.0's schema object follows) like so:
- `x-kubernetes-int-or-string: true` is `anyOf: [integer, string]` (controller-gen writes that
  `anyOf` itself; a hand-written CRD may carry only the flag);
- `x-kubernetes-preserve-unknown-fields: true` lets an object hold fields its schema does not
  name; every other object holds only its `properties` (an `additionalProperties` schema, when
  given, judges the rest). The API server prunes an unknown field, or refuses it under
  `fieldValidation=Strict` (kubectl's default), so either way what we meant never arrives;
- `nullable: true` also admits null;
- every other `x-kubernetes-*` key is dropped: list and map types, embedded resources, and the CEL
  rules of `x-kubernetes-validations`, which need a CEL evaluator (not checked here).
Top-level `metadata` is the API server's ObjectMeta, not the CRD's: it is checked by
kubernetes-validate inside a ConfigMap.
"""

from __future__ import annotations

import functools
import gzip
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from tests.support import REPO_ROOT

#: Where the platform directories may be, first match wins.
SCHEMA_ROOTS: tuple[Path, ...] = tuple(
    Path(p)
    for p in (
        os.environ.get("SPECDEPLOY_REFEREE_SCHEMAS", ""),
        REPO_ROOT / "tests" / "fixtures" / "platforms",
        REPO_ROOT.parent / "shared" / "referees" / "platforms",
    )
    if str(p)
)


@dataclass(frozen=True)
class Crd:
    """Where one kind's published CRD is: the platform directory and the file in it."""

    platform: str
    filename: str


#: (API group, kind) -> the CRD that defines it. Every custom kind an emitter produces must be
#: here; test_schemas.py fails on one that is not.
CRDS: dict[tuple[str, str], Crd] = {
    ("serving.kserve.io", "LLMInferenceService"): Crd(
        "kserve", "serving.kserve.io_llminferenceservices.yaml.gz"
    ),
    ("serving.kserve.io", "InferenceService"): Crd(
        "kserve", "serving.kserve.io_inferenceservices.yaml.gz"
    ),
    ("kaito.sh", "Workspace"): Crd("kaito", "kaito.sh_workspaces.yaml"),
    ("inference.networking.k8s.io", "InferencePool"): Crd(
        "gateway-api-inference-extension", "inference.networking.k8s.io_inferencepools.yaml"
    ),
    ("gateway.networking.k8s.io", "HTTPRoute"): Crd(
        "gateway-api", "gateway.networking.k8s.io_httproutes.yaml"
    ),
}
#: Kinds whose published CRD could not be had: a JSON Schema transcribed from the kind's Go types
#: (kubebuilder markers), committed here; its `$comment` names the source and what it leaves out.
TRANSCRIBED: dict[tuple[str, str], Path] = {
    ("nvidia.com", "DynamoGraphDeployment"): REPO_ROOT
    / "tests"
    / "fixtures"
    / "platforms"
    / "dynamo"
    / "dynamographdeployment-v1beta1.schema.json",
}
#: The vllm-stack chart's values schema.
VALUES_SCHEMA = Crd("production-stack", "values.schema.json")


class SchemaMissing(LookupError):
    """The published file for a kind is not in any schema root."""


def find(crd: Crd) -> Path:
    for root in SCHEMA_ROOTS:
        path = root / crd.platform / crd.filename
        if path.is_file():
            return path
    roots = ", ".join(str(r) for r in SCHEMA_ROOTS)
    raise SchemaMissing(f"{crd.platform}/{crd.filename} is in none of: {roots}")


def available(crd: Crd) -> bool:
    try:
        find(crd)
    except SchemaMissing:
        return False
    return True


def read_text(path: Path) -> str:
    if path.suffix == ".gz":
        with gzip.open(path, "rt", encoding="utf-8") as f:
            return f.read()
    return path.read_text(encoding="utf-8")


@functools.cache
def crd_document(crd: Crd) -> dict[str, Any]:
    """The CustomResourceDefinition (C loader: the KServe CRDs are 2 MB of YAML)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    docs = [d for d in yaml.load_all(read_text(find(crd)), Loader=loader) if d]
    (doc,) = [d for d in docs if d.get("kind") == "CustomResourceDefinition"]
    return dict(doc)


def crd_for(api_version: str, kind: str) -> Crd:
    group = api_version.rpartition("/")[0]
    try:
        return CRDS[(group, kind)]
    except KeyError:
        raise SchemaMissing(
            f"no published schema is registered for {api_version} {kind} "
            "(tests/unit/emitters/referees.py CRDS)"
        ) from None


@functools.cache
def validator(api_version: str, kind: str) -> jsonschema.Draft4Validator:
    """A validator for one served version of a custom kind, from its CRD."""
    group = api_version.rpartition("/")[0]
    if (group, kind) in TRANSCRIBED:
        schema = json.loads(TRANSCRIBED[(group, kind)].read_text(encoding="utf-8"))
        return jsonschema.Draft4Validator(schema)
    crd = crd_for(api_version, kind)
    spec = crd_document(crd)["spec"]
    version = api_version.rpartition("/")[2]
    served = {v["name"]: v for v in spec["versions"] if v.get("served", True)}
    if version not in served:
        raise SchemaMissing(f"{crd.filename} serves {sorted(served)} of {kind}, not {version}")
    schema = structural(served[version]["schema"]["openAPIV3Schema"])
    # ObjectMeta is the API server's (checked separately), whatever the CRD says of it.
    schema["properties"]["metadata"] = {"type": "object"}
    return jsonschema.Draft4Validator(schema)


def structural(node: Any) -> Any:
    """A CRD schema node as a JSON Schema with the API server's unknown-field rule."""
    if isinstance(node, list):
        return [structural(n) for n in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key.startswith("x-kubernetes-") or key in ("nullable", "default", "description"):
            continue
        if key in ("properties", "patternProperties", "definitions"):
            out[key] = {k: structural(v) for k, v in value.items()}
        elif key in ("items", "additionalProperties", "not", "allOf", "anyOf", "oneOf"):
            out[key] = structural(value)
        else:
            out[key] = value
    if node.get("x-kubernetes-int-or-string") and "anyOf" not in node:
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if node.get("type") == "object" and not node.get("x-kubernetes-preserve-unknown-fields"):
        out.setdefault("additionalProperties", False)
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    return out


def crd_errors(body: dict[str, Any]) -> list[str]:
    """What the kind's published CRD says is wrong with `body`, one line per problem, each with
    its field path; empty when it validates. Raises SchemaMissing when there is no CRD."""
    check = validator(str(body["apiVersion"]), str(body["kind"]))
    return [
        f"{_path(error)}: {error.message}"
        for error in sorted(check.iter_errors(body), key=lambda e: list(map(str, e.path)))
    ]


@functools.cache
def values_validator() -> jsonschema.protocols.Validator:
    schema = json.loads(read_text(find(VALUES_SCHEMA)))
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema)  # type: ignore[no-any-return]


def values_errors(values: dict[str, Any]) -> list[str]:
    """What the vllm-stack chart's values.schema.json says is wrong with `values`, and every key
    it does not name: the schema leaves objects open, but the chart's templates read only the
    keys it documents, so a misspelt one would change nothing, silently."""
    errors = [f"{_path(e)}: {e.message}" for e in values_validator().iter_errors(values)]
    return errors + _unknown_keys(values, values_validator().schema, "")


def _unknown_keys(value: Any, schema: Any, path: str) -> list[str]:
    if not isinstance(schema, dict):
        return []
    if isinstance(value, dict) and "properties" in schema:
        out = []
        for key, item in value.items():
            if key in schema["properties"]:
                out += _unknown_keys(item, schema["properties"][key], f"{path}.{key}")
            elif not schema.get("additionalProperties"):
                out.append(f"{path or '.'}: {key!r} is not a key of the chart's values schema")
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [
            e for i, v in enumerate(value) for e in _unknown_keys(v, schema["items"], f"{path}.{i}")
        ]
    return []


def resources(crd: Crd) -> Iterator[tuple[str, str, str, bool]]:
    """(group/version, plural, kind, namespaced) for every served version of a CRD."""
    spec = crd_document(crd)["spec"]
    for version in spec["versions"]:
        if version.get("served", True):
            yield (
                f"{spec['group']}/{version['name']}",
                spec["names"]["plural"],
                spec["names"]["kind"],
                spec["scope"] == "Namespaced",
            )


def _path(error: jsonschema.ValidationError) -> str:
    return "." + ".".join(str(p) for p in error.absolute_path) if error.absolute_path else "."
