"""The platforms' schemas as referees: what each platform's API server (or Helm, for the
vllm-stack chart's values) would refuse in what specdeploy emits.

Each custom kind has one referee committed here (tests/fixtures/platforms/, README.md there says
where each file comes from):
- `CRDS`: the platform's published CRD, verbatim, where the file index held a copy that could be
  vendored (Kaito's Workspace). Its `openAPIV3Schema` becomes a JSON Schema (below).
- `TRANSCRIBED`: our own JSON Schema of the kind, written from its Go types and kubebuilder
  markers at a release, where the published CRD cannot be committed (KServe's are 2 MB; the
  file index's copies of the others are not at a release, or too large to read). The `$comment`
  atop each names the repository, tag, commit, files and lines it follows.
The published CRDs of the transcribed kinds, and the chart's own values.schema.json, are looked
for outside the repository ($SPECDEPLOY_REFEREE_SCHEMAS, then ../shared/referees/platforms/, per
platform directory); where one is on the machine, test_schemas.py checks that it agrees with our
transcription on every emitted object and every seeded mistake.

A CRD schema becomes a JSON Schema (draft 4, which OpenAPI 3.0's schema object follows) like so:
- `x-kubernetes-int-or-string: true` is `anyOf: [integer, string]` (controller-gen writes that
  `anyOf` itself; a hand-written CRD may carry only the flag);
- `x-kubernetes-preserve-unknown-fields: true` lets an object hold fields its schema does not
  name; every other object holds only its `properties` (an `additionalProperties` schema, when
  given, judges the rest). The API server prunes an unknown field, or refuses it under
  `fieldValidation=Strict` (kubectl's default), so either way what we meant never arrives;
- `nullable: true` also admits null;
- every other `x-kubernetes-*` key is dropped: list and map types, embedded resources, and the CEL
  rules of `x-kubernetes-validations`, which need a CEL evaluator (not checked here; a
  transcription states the few it expresses in JSON Schema).
Top-level `metadata` is the API server's ObjectMeta, not the CRD's: it is checked by
kubernetes-validate inside a ConfigMap.

A transcription marks where a kind embeds a core/v1 type with `"x-core": "<type>"` (PodSpec,
PodTemplateSpec, Container, EnvVar): that value, less the fields the node's own `properties`
add (Go's inline embedding, e.g. KServe's predictor is a PodSpec plus its own fields), is checked
by kubernetes-validate (strict) as that core type, at each Kubernetes release of K8S_VERSIONS;
`x-core-optional` names required core fields the kind makes optional.
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
import kubernetes_validate
import yaml

from tests.support import REPO_ROOT

PLATFORM_FIXTURES = REPO_ROOT / "tests" / "fixtures" / "platforms"
#: Where the platform directories of published files may be, first match wins.
SCHEMA_ROOTS: tuple[Path, ...] = tuple(
    Path(p)
    for p in (
        os.environ.get("SPECDEPLOY_REFEREE_SCHEMAS", ""),
        PLATFORM_FIXTURES,
        REPO_ROOT.parent / "shared" / "referees" / "platforms",
    )
    if str(p)
)
#: Kubernetes releases an embedded core/v1 type must validate against (as in
#: tests/unit/manifests/conftest.py): the oldest supported and the newest kubernetes-validate ships.
K8S_VERSIONS = ("1.30.0", kubernetes_validate.latest_version())


@dataclass(frozen=True)
class Crd:
    """Where one kind's published CRD (or the chart's values schema) is: the platform directory
    and the file in it."""

    platform: str
    filename: str


@dataclass(frozen=True)
class Transcribed:
    """Our JSON Schemas of one custom kind, one file per served version, with the names its
    kubebuilder markers give the CRD (`+kubebuilder:resource:path=...`), and the published CRD
    to cross-check against where it is on the machine."""

    group: str
    kind: str
    plural: str
    files: tuple[tuple[str, str], ...]
    """(version, schema file in tests/fixtures/platforms/<platform>/)"""
    platform: str
    published: Crd | None = None
    namespaced: bool = True

    def path(self, version: str) -> Path:
        for served, filename in self.files:
            if served == version:
                return PLATFORM_FIXTURES / self.platform / filename
        served_versions = [v for v, _ in self.files]
        raise SchemaMissing(f"{self.kind} is transcribed for {served_versions}, not {version}")


#: (API group, kind) -> the published CRD committed here.
CRDS: dict[tuple[str, str], Crd] = {
    ("kaito.sh", "Workspace"): Crd("kaito", "kaito.sh_workspaces.yaml"),
}
#: (API group, kind) -> our transcription. Every custom kind an emitter produces is in CRDS or
#: here; test_schemas.py fails on one that is in neither.
TRANSCRIBED: dict[tuple[str, str], Transcribed] = {
    (t.group, t.kind): t
    for t in (
        Transcribed(
            "serving.kserve.io",
            "LLMInferenceService",
            "llminferenceservices",
            (
                ("v1alpha2", "llminferenceservice-v1alpha2.schema.json"),
                ("v1alpha1", "llminferenceservice-v1alpha1.schema.json"),
            ),
            "kserve",
            Crd("kserve", "serving.kserve.io_llminferenceservices.yaml.gz"),
        ),
        Transcribed(
            "serving.kserve.io",
            "InferenceService",
            "inferenceservices",
            (("v1beta1", "inferenceservice-v1beta1.schema.json"),),
            "kserve",
            Crd("kserve", "serving.kserve.io_inferenceservices.yaml.gz"),
        ),
        Transcribed(
            "inference.networking.k8s.io",
            "InferencePool",
            "inferencepools",
            (("v1", "inferencepool-v1.schema.json"),),
            "gateway-api-inference-extension",
            Crd(
                "gateway-api-inference-extension",
                "inference.networking.k8s.io_inferencepools.yaml",
            ),
        ),
        Transcribed(
            "gateway.networking.k8s.io",
            "HTTPRoute",
            "httproutes",
            (("v1", "httproute-v1.schema.json"),),
            "gateway-api",
            Crd("gateway-api", "gateway.networking.k8s.io_httproutes.yaml"),
        ),
        Transcribed(
            "nvidia.com",
            "DynamoGraphDeployment",
            "dynamographdeployments",
            (("v1beta1", "dynamographdeployment-v1beta1.schema.json"),),
            "dynamo",
        ),
    )
}
#: The vllm-stack chart's values: our transcription (the file index's copy of the chart's
#: values.schema.json predates the release and refuses what the release accepts), and the
#: published file to cross-check against where it is on the machine.
VALUES_SCHEMA = PLATFORM_FIXTURES / "production-stack" / "vllm-stack-values.schema.json"
PUBLISHED_VALUES_SCHEMA = Crd("production-stack", "values.schema.json")


class SchemaMissing(LookupError):
    """No referee for a kind, or its published file is not on this machine."""


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
    """The kind's published CRD: vendored (CRDS) or looked for outside (TRANSCRIBED)."""
    group = api_version.rpartition("/")[0]
    if (group, kind) in CRDS:
        return CRDS[(group, kind)]
    transcribed = TRANSCRIBED.get((group, kind))
    if transcribed is None or transcribed.published is None:
        raise SchemaMissing(
            f"no published schema is registered for {api_version} {kind} "
            "(tests/unit/emitters/referees.py CRDS, TRANSCRIBED)"
        )
    return transcribed.published


def referee_for(api_version: str, kind: str) -> Crd | Transcribed:
    """The committed referee of a kind: our transcription, else the vendored CRD."""
    group = api_version.rpartition("/")[0]
    return TRANSCRIBED.get((group, kind)) or crd_for(api_version, kind)


@functools.cache
def validator(api_version: str, kind: str) -> jsonschema.protocols.Validator:
    """A validator for one served version of a custom kind, from its committed referee."""
    referee = referee_for(api_version, kind)
    if isinstance(referee, Transcribed):
        path = referee.path(api_version.rpartition("/")[2])
        return TranscribedValidator(json.loads(path.read_text(encoding="utf-8")))
    return published_validator(api_version, kind)


@functools.cache
def published_validator(api_version: str, kind: str) -> jsonschema.Draft4Validator:
    """A validator for one served version of a custom kind, from its published CRD."""
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


# -- embedded core/v1 types -----------------------------------------------------------------

#: What stands in for a required core field a kind makes optional (`x-core-optional`).
_PLACEHOLDERS: dict[str, Any] = {
    "containers": [{"name": "core-check", "image": "core-check"}],
    "name": "core-check",
}


def _wrapped(core: str, value: dict[str, Any]) -> tuple[dict[str, Any], tuple[str | int, ...]]:
    """A built-in object holding `value` as its `core` type, and where in it `value` sits."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "core-check"}}
    if core == "PodSpec":
        return {**pod, "spec": value}, ("spec",)
    if core == "Container":
        return {**pod, "spec": {"containers": [value]}}, ("spec", "containers", 0)
    if core == "EnvVar":
        container = {"name": "core-check", "image": "core-check", "env": [value]}
        return {**pod, "spec": {"containers": [container]}}, ("spec", "containers", 0, "env", 0)
    if core == "PodTemplateSpec":
        metadata = dict(value.get("metadata") or {})
        labels = metadata.setdefault("labels", {"core-check": "pod"})
        deployment = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "core-check"},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {**value, "metadata": metadata},
            },
        }
        return deployment, ("spec", "template")
    raise ValueError(f"x-core {core!r}: not one of PodSpec, PodTemplateSpec, Container, EnvVar")


def _core(
    validator: Any, core: str, instance: Any, schema: dict[str, Any]
) -> Iterator[jsonschema.ValidationError]:
    """The `x-core` keyword: the instance, less the node's own properties, as a core/v1 type."""
    if not isinstance(instance, dict):
        return  # `type` reports it
    own = schema.get("properties", {})
    value = {k: v for k, v in instance.items() if k not in own}
    for field in schema.get("x-core-optional", ()):
        value.setdefault(field, _PLACEHOLDERS[field])
    body, prefix = _wrapped(core, value)
    for version in K8S_VERSIONS:
        try:
            kubernetes_validate.validate(body, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            path = list(error.path)
            inside = path[len(prefix) :] if tuple(path[: len(prefix)]) == prefix else []
            yield jsonschema.ValidationError(
                f"{error.message} (core/v1 {core}, Kubernetes {version})", path=inside
            )
            return


TranscribedValidator = jsonschema.validators.extend(jsonschema.Draft4Validator, {"x-core": _core})


# -- verdicts ---------------------------------------------------------------------------------


def crd_errors(body: dict[str, Any]) -> list[str]:
    """What the kind's committed referee says is wrong with `body`, one line per problem, each
    with its field path; empty when it validates. Raises SchemaMissing when there is none."""
    return _errors(validator(str(body["apiVersion"]), str(body["kind"])), body)


def published_errors(body: dict[str, Any]) -> list[str]:
    """The same verdict from the kind's published CRD (SchemaMissing when not on the machine)."""
    return _errors(published_validator(str(body["apiVersion"]), str(body["kind"])), body)


def _errors(check: jsonschema.protocols.Validator, body: dict[str, Any]) -> list[str]:
    return [
        f"{_path(error)}: {error.message}"
        for error in sorted(check.iter_errors(body), key=lambda e: list(map(str, e.path)))
    ]


@functools.cache
def _values_validator(path: Path) -> jsonschema.protocols.Validator:
    schema = json.loads(read_text(path))
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema)  # type: ignore[no-any-return]


def values_errors(values: dict[str, Any], schema: Path = VALUES_SCHEMA) -> list[str]:
    """What the vllm-stack chart's values schema says is wrong with `values`, and every key it
    does not name: the schema leaves objects open, but the chart's templates read only the keys
    it documents, so a misspelt one would change nothing, silently."""
    check = _values_validator(schema)
    errors = [f"{_path(e)}: {e.message}" for e in check.iter_errors(values)]
    return errors + _unknown_keys(values, check.schema, "")


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


def resources(referee: Crd | Transcribed) -> Iterator[tuple[str, str, str, bool]]:
    """(group/version, plural, kind, namespaced) for every served version of a kind."""
    if isinstance(referee, Transcribed):
        for version, _ in referee.files:
            yield (f"{referee.group}/{version}", referee.plural, referee.kind, referee.namespaced)
        return
    spec = crd_document(referee)["spec"]
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
