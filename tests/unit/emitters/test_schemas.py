"""Every object every platform emits, for every example profile (with its baseline twin), an A/B
split and a multi-node shape, judged by that platform's schema (tests/unit/emitters/referees.py):
the vendored CRD or our transcription of its kind, kubernetes-validate for built-in kinds, and the
vllm-stack chart's values schema for production-stack's values. A kind without a referee fails;
seeded mistakes show each referee refuses what the API server would. Where a platform's published
CRD (or the chart's values.schema.json) is on this machine, outside the repository, the last tests
check that it agrees with our transcription."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import kubernetes_validate
import pytest
import yaml

from orchestrator.emitters.base import EMITTER_CLASSES, emitter_for
from orchestrator.emitters.kaito import KAITO_VLLM_VERSION
from orchestrator.errors import IncompatibleError
from orchestrator.plan.types import DeploymentPlan
from tests.support import EXAMPLE_PROFILES, write_profile
from tests.unit.emitters.conftest import at_release
from tests.unit.emitters.llmd_router_chart import chart_pools
from tests.unit.emitters.referees import (
    PUBLISHED_VALUES_SCHEMA,
    TRANSCRIBED,
    Crd,
    SchemaMissing,
    available,
    crd_errors,
    find,
    published_errors,
    values_errors,
)
from tests.unit.manifests.conftest import K8S_VERSIONS, valid_plan, validate_object

PLATFORMS = sorted(EMITTER_CLASSES)
#: Kinds Kubernetes serves itself (kubernetes-validate), and LeaderWorkerSet, whose vendored
#: schema tests/unit/manifests/conftest.py applies.
BUILT_IN_GROUPS = frozenset({"", "apps", "leaderworkerset.x-k8s.io"})

#: Profile variants beyond the examples: an A/B split, and a replica across 4 nodes (TP 4 x PP 4
#: on 4-GPU nodes: KServe's worker, llm-d's LeaderWorkerSet, Dynamo's multinode, Kaito's count).
SHAPES: dict[str, dict[str, Any]] = {
    "split": {"deploy": {"baseline": True, "baseline_traffic_percent": 20, "gateway": "infra/gw"}},
    "multinode": {
        "hardware": {"tensor_parallel_size": 4, "pipeline_parallel_size": 4, "gpus_per_node": 4},
        "deploy": {"baseline": True},
    },
}
CASES = [*(p.stem for p in EXAMPLE_PROFILES), *SHAPES]


def plan_for(case: str, tmp_path: Path, release: str | None = None) -> DeploymentPlan:
    """The case's plan; `release`: planned for that vLLM release instead (vLLM cases only)."""
    if case in SHAPES:
        sections = dict(SHAPES[case])
        if release is not None:
            sections["engine"] = {"name": "vllm", "version": release}
        return valid_plan(write_profile(tmp_path, f"{case}.yaml", **sections))
    (profile,) = [p for p in EXAMPLE_PROFILES if p.stem == case]
    if release is not None:
        profile = at_release(profile, tmp_path, release)
    return valid_plan(profile)


def emitted(platform: str, plan: DeploymentPlan, **options: str) -> list[dict[str, Any]]:
    """What the platform emits for the plan (production-stack: its values files; llm-d: also
    the InferencePools its router chart makes from the values files); raises
    IncompatibleError when the platform refuses the profile."""
    emitter = emitter_for(platform, options)
    if platform == "production-stack":
        return [yaml.safe_load(v) for v in emitter.files(plan).values()]
    bodies = [m.body for m in emitter.emit(plan)]
    if platform == "llm-d":  # and the pools llm-d's router chart makes from our values
        namespace = plan.profile.metadata.namespace or "default"
        bodies += chart_pools(emitter.files(plan), namespace=namespace).values()
    return bodies


def objects(platform: str, plan: DeploymentPlan, **options: str) -> list[dict[str, Any]]:
    """What the platform emits for the plan, or skip when the platform refuses the profile
    (test_platforms.py checks each refusal's what/why/fix)."""
    try:
        return emitted(platform, plan, **options)
    except IncompatibleError as exc:
        pytest.skip(f"{platform} refuses this profile: {exc}")


def referee_errors(body: dict[str, Any]) -> list[str]:
    """The committed referee's verdict on one emitted object; a kind with none raises
    SchemaMissing (a failure)."""
    group = str(body["apiVersion"]).rpartition("/")[0]
    if group in BUILT_IN_GROUPS:
        validate_object(body)  # raises with the field path
        return []
    for version in K8S_VERSIONS:  # ObjectMeta as the API server reads it
        kubernetes_validate.validate(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": body["metadata"]},
            version,
            strict=True,
        )
    return crd_errors(body)


def require(crd: Crd) -> None:
    """Skip unless the published file (kept outside the repository) is on this machine."""
    if not available(crd):
        pytest.skip(f"published schema {crd.platform}/{crd.filename} is not on this machine")


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("platform", PLATFORMS)
def test_every_emitted_object_validates(platform: str, case: str, tmp_path: Path) -> None:
    emitted = objects(platform, plan_for(case, tmp_path))
    assert emitted
    if platform == "production-stack":
        for values in emitted:
            assert values_errors(values) == []
        return
    for body in emitted:
        where = f"{body['kind']}/{body['metadata']['name']}"
        assert referee_errors(body) == [], where


@pytest.mark.parametrize("case", CASES)
def test_kaito_on_existing_nodes_validates(case: str, tmp_path: Path) -> None:
    """nodes=existing (what the default nodes=provisioned refuses for want of a SKU), at the
    vLLM release Kaito's preset image runs."""
    if not case.startswith("vllm-") and case not in SHAPES:
        pytest.skip("Kaito runs vLLM only")
    plan = plan_for(case, tmp_path, release=KAITO_VLLM_VERSION)
    for body in objects("kaito", plan, nodes="existing"):
        assert "instanceType" not in body.get("resource", {})
        assert referee_errors(body) == [], f"{body['kind']}/{body['metadata']['name']}"


@pytest.mark.parametrize("case", ["vllm-qwen3-4b-draft", "split", "multinode"])
def test_kserve_v1alpha1_validates(case: str, tmp_path: Path) -> None:
    for body in objects("kserve", plan_for(case, tmp_path), **{"api-version": "v1alpha1"}):
        assert body["apiVersion"] == "serving.kserve.io/v1alpha1"
        assert crd_errors(body) == []


@pytest.mark.parametrize("platform", PLATFORMS)
def test_every_custom_kind_has_a_referee(platform: str) -> None:
    """No emitted kind escapes the referee: each custom kind an emitter declares, at each version
    it can write, has a committed schema (validator() raises SchemaMissing otherwise)."""
    for kind in emitter_for(platform).kinds:  # type: ignore[attr-defined]
        if kind.api_version.rpartition("/")[0] in BUILT_IN_GROUPS:
            continue
        assert crd_errors({"apiVersion": kind.api_version, "kind": kind.kind}) is not None


def test_a_kind_without_a_schema_fails() -> None:
    body = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    with pytest.raises(SchemaMissing, match="no published schema"):
        referee_errors(body)


def test_a_version_without_a_transcription_fails() -> None:
    body = {"apiVersion": "serving.kserve.io/v1beta2", "kind": "LLMInferenceService"}
    with pytest.raises(SchemaMissing, match="transcribed for"):
        crd_errors(body)


# -- seeded mistakes: each referee refuses what the platform's API server would --------------

Mutation = Callable[[dict[str, Any]], None]


def _emitted(platform: str, kind: str, tmp_path: Path, case: str = "vllm-qwen3-4b-draft") -> Any:
    return next(b for b in objects(platform, plan_for(case, tmp_path)) if b["kind"] == kind)


def _node(body: dict[str, Any], path: str) -> tuple[Any, str]:
    node: Any = body
    *parents, last = path.split(".")
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node, last


def _set(path: str, value: Any) -> Mutation:
    def mutate(body: dict[str, Any]) -> None:
        node, last = _node(body, path)
        node[last] = value

    return mutate


def _drop(path: str) -> Mutation:
    def mutate(body: dict[str, Any]) -> None:
        node, last = _node(body, path)
        del node[last]

    return mutate


class Seeded(NamedTuple):
    """A mistake put into an emitted object, and what the referee must say of it."""

    platform: str
    kind: str
    mutate: Mutation
    field: str
    message: str
    case: str = "vllm-qwen3-4b-draft"
    cel: bool = False
    """The published CRD states this rule in CEL, which a structural check cannot evaluate (our
    transcription expresses it in JSON Schema)."""


SEEDED = [
    Seeded(
        "kserve",
        "LLMInferenceService",
        _set("spec.parallelism.tensor", 0),
        ".spec.parallelism.tensor",
        "less than the minimum of 1",
    ),
    Seeded(
        "kserve",
        "LLMInferenceService",
        _set("spec.parallelism.tensors", 2),
        ".spec.parallelism",
        "'tensors' was unexpected",
    ),
    Seeded(
        "kserve",
        "LLMInferenceService",
        _set("spec.parallelism.pipeline", "4"),
        ".spec.parallelism.pipeline",
        "is not of type 'integer'",
    ),
    Seeded(
        "kserve",
        "LLMInferenceService",
        _set("spec.template.containers.0.args", "--max-model-len 4096"),
        ".spec.template.containers.0.args",
        "is not of type 'array'",
    ),
    Seeded(
        "kserve",
        "LLMInferenceService",
        _set("spec.worker.containers.0.resource", {}),
        ".spec.worker.containers.0",
        "'resource' was unexpected",
        case="multinode",
    ),
    Seeded(
        "kserve",
        "LLMInferenceService",
        _set("spec.router.route.weight", -20),
        ".spec.router.route.weight",
        "less than the minimum of 0",
        case="split",
    ),
    Seeded(
        "kserve",
        "LLMInferenceService",
        _drop("spec.model.uri"),
        ".spec.model",
        "'uri' is a required property",
    ),
    Seeded(
        "kserve-runtime",
        "InferenceService",
        _set("spec.predictor.model.storageURI", "hf://Qwen/Qwen3-8B"),
        ".spec.predictor.model",
        "'storageURI' was unexpected",
    ),
    Seeded(
        "kserve-runtime",
        "InferenceService",
        _set("spec.predictor.minReplicas", "1"),
        ".spec.predictor.minReplicas",
        "is not of type 'integer'",
    ),
    Seeded(
        "kserve-runtime",
        "InferenceService",
        _set("spec.predictor.nodeSelectors", {}),
        ".spec.predictor",
        "'nodeSelectors' was unexpected",
    ),
    Seeded(
        "kserve-runtime",
        "InferenceService",
        _set("spec.predictor.model.modelFormat", {"version": "1"}),
        ".spec.predictor.model.modelFormat",
        "'name' is a required property",
    ),
    Seeded(
        "kaito",
        "Workspace",
        _set("resource.count", "1"),
        ".resource.count",
        "is not of type 'integer'",
    ),
    Seeded(
        "kaito",
        "Workspace",
        _set("inference.presets", {"name": "x"}),
        ".inference",
        "'presets' was unexpected",
    ),
    Seeded(
        "dynamo",
        "DynamoGraphDeployment",
        _set("spec.components.1.multinode", {"nodeCount": 1}),
        ".spec.components.1.multinode.nodeCount",
        "less than the minimum of 2",
    ),
    Seeded(
        "dynamo",
        "DynamoGraphDeployment",
        _set("spec.components.1.replicas", "1"),
        ".spec.components.1.replicas",
        "is not of type 'integer'",
    ),
    Seeded(
        "dynamo",
        "DynamoGraphDeployment",
        _set("spec.services", {}),
        ".spec",
        "'services' was unexpected",
    ),
    Seeded(
        "dynamo",
        "DynamoGraphDeployment",
        _set("spec.components.1.podTemplate.spec.containers.0.args", "--tp 2"),
        ".spec.components.1.podTemplate.spec.containers.0.args",
        "is not of type 'array'",
    ),
    Seeded(
        "llm-d",
        "InferencePool",
        _set("spec.targetPorts.0.number", 0),
        ".spec.targetPorts.0.number",
        "less than the minimum of 1",
    ),
    Seeded(
        "llm-d",
        "InferencePool",
        _set("spec.selector.matchLabels", {}),
        ".spec.selector.matchLabels",
        "should be non-empty",
    ),
    Seeded(
        "llm-d",
        "InferencePool",
        _drop("spec.endpointPickerRef.port"),
        ".spec.endpointPickerRef",
        "is not valid under any of the given schemas",
        cel=True,
    ),
    Seeded(
        "llm-d",
        "HTTPRoute",
        _set("spec.rules.0.backendRefs.1.weight", -5),
        ".spec.rules.0.backendRefs.1.weight",
        "less than the minimum of 0",
        case="split",
    ),
    Seeded(
        "kubernetes",
        "HTTPRoute",
        _drop("spec.rules.0.backendRefs.0.port"),
        ".spec.rules.0.backendRefs.0",
        "is not valid under any of the given schemas",
        case="split",
        cel=True,
    ),
    Seeded(
        "kubernetes",
        "HTTPRoute",
        _set("spec.rules.0.retry", {"attempts": 2}),
        ".spec.rules.0",
        "'retry' was unexpected",
        case="split",
    ),
]


def _id(seeded: Seeded) -> str:
    return f"{seeded.platform}:{seeded.field}:{seeded.message.split()[-1]}"


@pytest.mark.parametrize("seeded", SEEDED, ids=_id)
def test_a_seeded_mistake_is_caught(seeded: Seeded, tmp_path: Path) -> None:
    body = copy.deepcopy(_emitted(seeded.platform, seeded.kind, tmp_path, seeded.case))
    assert crd_errors(body) == []
    seeded.mutate(body)
    errors = crd_errors(body)
    assert any(e.startswith(f"{seeded.field}:") and seeded.message in e for e in errors), errors


def test_a_seeded_mistake_in_the_chart_values_is_caught(tmp_path: Path) -> None:
    (values, *_) = objects("production-stack", plan_for("vllm-qwen3-4b-draft", tmp_path))
    assert values_errors(values) == []
    values["servingEngineSpec"]["modelSpec"][0]["replicaCount"] = "one"
    errors = values_errors(values)
    assert any(e.startswith(".servingEngineSpec.modelSpec.0.replicaCount:") for e in errors)
    values["servingEngineSpec"]["modelSpec"][0]["requestGPUs"] = 1
    assert ".servingEngineSpec.modelSpec.0: 'requestGPUs' is not a key" in " ".join(
        values_errors(values)
    )


# -- our transcriptions against the published files, where those are on this machine ---------


def _every_emitted(tmp_path: Path) -> Iterator[dict[str, Any]]:
    for platform in PLATFORMS:
        for case in CASES:
            options = [{}, {"api-version": "v1alpha1"}] if platform == "kserve" else [{}]
            for option in options:
                try:
                    plan = plan_for(case, tmp_path)
                    yield from emitted(platform, plan, **option)
                except IncompatibleError:
                    continue


@pytest.mark.parametrize(
    "key", sorted(k for k, t in TRANSCRIBED.items() if t.published), ids="/".join
)
def test_the_transcription_agrees_with_the_published_crd(
    key: tuple[str, str], tmp_path: Path
) -> None:
    """Every emitted object of the kind, valid by our transcription, is valid by the published
    CRD too; every seeded mistake the published CRD can see, it reports at the same field."""
    published = TRANSCRIBED[key].published
    assert published is not None
    require(published)
    bodies = [b for b in _every_emitted(tmp_path) if b.get("kind") == key[1]]
    assert bodies
    for body in bodies:
        assert published_errors(body) == [], f"{body['apiVersion']} {body['metadata']['name']}"
    for seeded in (s for s in SEEDED if s.kind == key[1] and not s.cel):
        body = copy.deepcopy(_emitted(seeded.platform, seeded.kind, tmp_path, seeded.case))
        seeded.mutate(body)
        errors = published_errors(body)
        assert any(e.startswith(f"{seeded.field}:") for e in errors), (seeded.field, errors)


def test_the_values_transcription_agrees_with_the_chart_schema(tmp_path: Path) -> None:
    """What we emit for production-stack is valid by the chart's published values.schema.json,
    which also refuses the seeded wrong type."""
    require(PUBLISHED_VALUES_SCHEMA)
    schema = find(PUBLISHED_VALUES_SCHEMA)
    values_files = [v for v in _every_emitted(tmp_path) if "servingEngineSpec" in v]
    assert values_files
    for values in values_files:
        assert values_errors(values, schema) == []
    values = copy.deepcopy(values_files[0])
    values["servingEngineSpec"]["modelSpec"][0]["replicaCount"] = "one"
    assert any(".replicaCount:" in e for e in values_errors(values, schema))


class TestStructural:
    """How a CRD schema is read, on a small schema of the shapes the real CRDs use."""

    SCHEMA: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "size": {"x-kubernetes-int-or-string": True},
            "open": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "closed": {"type": "object", "properties": {"a": {"type": "string"}}},
            "pruned": {"type": "object"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "maybe": {"type": "string", "nullable": True},
            "ruled": {
                "type": "integer",
                "minimum": 1,
                "x-kubernetes-validations": [{"rule": "self > 5"}],
            },
        },
    }

    def errors(self, value: dict[str, Any]) -> list[str]:
        import jsonschema

        from tests.unit.emitters.referees import structural

        check = jsonschema.Draft4Validator(structural(self.SCHEMA))
        return [e.message for e in check.iter_errors(value)]

    def test_int_or_string_takes_either(self) -> None:
        assert self.errors({"size": 8}) == self.errors({"size": "8Gi"}) == []
        assert self.errors({"size": 1.5}) != []

    def test_preserve_unknown_fields_keeps_what_it_does_not_name(self) -> None:
        assert self.errors({"open": {"anything": {"at": "all"}}}) == []

    def test_other_objects_refuse_unknown_fields(self) -> None:
        assert self.errors({"closed": {"b": "x"}}) == [
            "Additional properties are not allowed ('b' was unexpected)"
        ]
        assert self.errors({"pruned": {"x": 1}}) != []  # the API server would drop it
        assert self.errors({"surprise": 1}) != []

    def test_maps_nullable_and_dropped_cel_rules(self) -> None:
        assert self.errors({"labels": {"a": "b"}, "maybe": None}) == []
        assert self.errors({"labels": {"a": 1}}) != []
        assert self.errors({"ruled": 2}) == []  # CEL is not evaluated; minimum is
        assert self.errors({"ruled": 0}) != []
