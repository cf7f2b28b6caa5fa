"""The resource side: the CRD generated from the profile schema (structural, validates every
example profile, accepted by the API's own CRD schema, equal to the chart's copy), the
`specdeploy.io/v1` spelling and the policy block, the objects and the in-cluster source."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.operator.crd import (
    as_json_schema,
    as_resource,
    custom_resource_definition,
    resource_schema,
    structural_problems,
)
from orchestrator.operator.objects import Owner, owned_manifests
from orchestrator.operator.reconcile import (
    effective_profile,
    exploring,
    plan_resource,
    traffic_status,
)
from orchestrator.operator.source import InClusterCheckpoints
from orchestrator.plan.types import DeploymentPlan, RejectedPlan
from orchestrator.profile.loading import ProfileInvalid, parse_profile
from tests.support import REPO_ROOT

EXAMPLES = sorted(
    [*(REPO_ROOT / "profiles").glob("*.yaml"), *(REPO_ROOT / "profiles").glob("*/*.yaml")]
)
CHART_CRD = (
    REPO_ROOT
    / "charts"
    / "specdeploy-operator"
    / "crd"
    / "speculativedeployments.specdeploy.io.yaml"
)


class TestCrd:
    def test_the_schema_is_structural(self) -> None:
        assert structural_problems(resource_schema()) == []

    @pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
    def test_every_example_profile_is_a_valid_resource(self, example: Path) -> None:
        document = as_resource(yaml.safe_load(example.read_text()))
        jsonschema.Draft202012Validator(as_json_schema(resource_schema())).validate(document)

    def test_a_typo_and_a_wrong_type_are_refused_by_the_api_server(self) -> None:
        validator = jsonschema.Draft202012Validator(as_json_schema(resource_schema()))
        profile = yaml.safe_load((REPO_ROOT / "profiles" / "vllm-qwen3-4b-draft.yaml").read_text())
        document = as_resource(profile)
        document["spec"]["proposer"]["num_speculative_token"] = 3
        document["spec"]["serving"]["max_model_len"] = "long"
        messages = sorted(e.message for e in validator.iter_errors(document))
        assert any("num_speculative_token" in m for m in messages)
        assert any("'long' is not of type 'integer'" in m for m in messages)

    def test_the_crd_object_is_valid_for_kubernetes(self) -> None:
        kubernetes_validate.validate(custom_resource_definition(), "1.33", strict=True)

    def test_status_subresource_conditions_and_printer_columns(self) -> None:
        [version] = custom_resource_definition()["spec"]["versions"]
        assert version["subresources"] == {"status": {}}
        columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
        assert columns["Ready"] == '.status.conditions[?(@.type=="Ready")].status'
        assert columns["Method"] == ".spec.proposer.method"
        assert columns["Acceptance"] == ".status.acceptance.meanLength"
        assert columns["Traffic"] == ".status.traffic.share"
        assert columns["Verdict"] == ".status.verdict"
        status = version["schema"]["openAPIV3Schema"]["properties"]["status"]
        assert status["properties"]["conditions"]["x-kubernetes-list-map-keys"] == ["type"]

    @pytest.mark.parametrize(
        ("broken", "problem"),
        [
            ({"type": "object", "properties": {"a": {"$ref": "#/x"}}}, "$ref is not allowed"),
            (
                {"type": "object", "properties": {"a": {"description": "no type"}}},
                ".a: has no type",
            ),
            (
                {"type": "array", "items": {"type": "object"}, "x-kubernetes-list-type": "map"},
                "list-map keys",
            ),
            ({"type": "object", "x-kubernetes-preserve-unknown": True}, "unknown extension"),
            (
                {
                    "type": "object",
                    "properties": {"a": {"type": "string"}},
                    "additionalProperties": {"type": "string"},
                },
                "mutually exclusive",
            ),
            ({"type": "object", "anyOf": [{"type": "string"}]}, "may not appear inside"),
            ({"type": "number", "minimum": 0, "exclusiveMinimum": 0}, "must be a boolean"),
        ],
    )
    def test_the_structural_check_catches(self, broken: dict[str, Any], problem: str) -> None:
        assert any(problem in p for p in structural_problems(broken))

    def test_the_chart_ships_the_generated_crd(self) -> None:
        assert yaml.safe_load(CHART_CRD.read_text()) == custom_resource_definition(), (
            "regenerate: specdeploy operator --print-crd > " + str(CHART_CRD.relative_to(REPO_ROOT))
        )

    def test_print_crd(self) -> None:
        result = CliRunner().invoke(cli, ["operator", "--print-crd"])
        assert result.exit_code == 0
        assert (
            yaml.safe_load(result.output)["metadata"]["name"]
            == "speculativedeployments.specdeploy.io"
        )


PROFILE = """\
apiVersion: {api}
kind: SpeculativeDeployment
metadata: {{name: demo}}
engine: {{name: vllm, version: "0.32.0"}}
target: {{model: Qwen/Qwen3-8B, revision: b968826d9c46dd6066d109eabc6255188de91218}}
proposer: {{method: ngram, num_speculative_tokens: 4}}
hardware: {{gpu: L40S}}
serving: {{max_model_len: 8192, max_concurrency: 8}}
deploy: {{baseline: {baseline}}}
policy: {policy}
"""


def profile_text(
    api: str = "specdeploy/v1", baseline: str = "true", policy: str = "{mode: switch}"
) -> str:
    """The profile; with api specdeploy.io/v1, the resource (the same fields under spec)."""
    text = PROFILE.format(api="specdeploy/v1", baseline=baseline, policy=policy)
    if api == "specdeploy/v1":
        return text
    return yaml.safe_dump(as_resource(yaml.safe_load(text)), sort_keys=False)


class TestPolicyInProfile:
    @pytest.mark.parametrize("api", ["specdeploy/v1", "specdeploy.io/v1"])
    def test_both_api_versions_are_the_same_spec(self, api: str) -> None:
        assert parse_profile(profile_text(api=api)).policy.mode == "switch"  # type: ignore[union-attr]

    def test_switch_needs_a_baseline_twin(self) -> None:
        with pytest.raises(ProfileInvalid) as caught:
            parse_profile(profile_text(baseline="false"))
        [issue] = caught.value.issues
        assert issue.path == "policy.mode" and "deploy.baseline: true" in issue.message

    def test_retune_thresholds_must_be_ordered(self) -> None:
        with pytest.raises(
            ProfileInvalid, match=r"lower_below=0\.9 must be below raise_above=0\.8"
        ):
            parse_profile(profile_text(policy="{mode: retune, retune: {lower_below: 0.9}}"))

    def test_validate_accepts_a_resource_file(self, tmp_path: Path) -> None:
        path = tmp_path / "demo.yaml"
        resource = yaml.safe_load(profile_text(api="specdeploy.io/v1"))
        resource["metadata"] |= {"uid": "u-1", "labels": {"team": "a"}}  # `kubectl get -o yaml`
        resource["status"] = {"verdict": "Speculative"}
        path.write_text(yaml.safe_dump(resource))
        result = CliRunner().invoke(cli, ["validate", str(path), "--offline"])
        assert result.exit_code == 0, result.output

    def test_a_resource_s_errors_name_the_field_under_spec_with_its_line(self) -> None:
        text = profile_text(api="specdeploy.io/v1").replace(
            "num_speculative_tokens:", "num_speculative_token:"
        )
        with pytest.raises(ProfileInvalid) as caught:
            parse_profile(text)
        [issue] = caught.value.issues
        line = next(n for n, x in enumerate(text.splitlines(), 1) if "num_speculative_token" in x)
        assert issue.path == "spec.proposer.num_speculative_token" and issue.line == line

    def test_a_resource_with_the_profile_at_the_top_level_is_refused_with_the_move(self) -> None:
        text = profile_text().replace("apiVersion: specdeploy/v1", "apiVersion: specdeploy.io/v1")
        with pytest.raises(ProfileInvalid) as caught:
            parse_profile(text)
        paths = {i.path: i for i in caught.value.issues}
        assert {"engine", "target", "proposer", "spec"} <= set(paths)
        assert "move it under spec:" in paths["engine"].fix and paths["engine"].line == 4


def body(text: str, uid: str = "uid-1", status: dict[str, Any] | None = None) -> dict[str, Any]:
    """The profile text as the resource the API server hands the operator."""
    doc = yaml.safe_load(text)
    doc["metadata"] |= {"namespace": "llm", "uid": uid, "generation": 3, "resourceVersion": "9"}
    return as_resource({**doc, "status": status or {}})


class TestPlanningAResource:
    def test_cluster_metadata_and_status_are_not_part_of_the_profile(self) -> None:
        plan = plan_resource(body(profile_text()), InClusterCheckpoints(offline=True))
        assert isinstance(plan, DeploymentPlan) and plan.profile.metadata.namespace == "llm"

    def test_a_local_directory_is_refused_with_the_way_out(self, tmp_path: Path) -> None:
        text = profile_text().replace("model: Qwen/Qwen3-8B", f"model: {tmp_path}")
        plan = plan_resource(body(text), InClusterCheckpoints(offline=True))
        assert isinstance(plan, RejectedPlan)
        [finding] = [f for f in plan.findings if f.rule == "checkpoint.unresolved"]
        assert (
            "never from the operator's file system"
            in finding.what + finding.why + finding.fix + str(finding)
        )

    def test_a_damaged_user_catalog_entry_is_logged_once_and_hides_nothing(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        catalog = Path(os.environ["SPECDEPLOY_CATALOG"])
        catalog.write_text('{"models": {"acme/bad": "oops"}}', encoding="utf-8")
        source = InClusterCheckpoints(offline=True)
        with caplog.at_level(logging.WARNING, logger="specdeploy.operator.catalog"):
            for _ in range(3):  # every reconcile plans again
                assert isinstance(plan_resource(body(profile_text()), source), DeploymentPlan)
        [record] = caplog.records
        assert f"user catalog {catalog}: entry 'acme/bad' is skipped" in record.getMessage()

    def test_the_retuned_length_survives_until_the_spec_changes_it(self) -> None:
        profile = parse_profile(profile_text(policy="{mode: retune}"))
        retuned = {"loop": {"numSpeculativeTokens": 2, "specTokens": 4}}
        assert effective_profile(profile, retuned).proposer.num_speculative_tokens == 2
        edited = {"loop": {"numSpeculativeTokens": 2, "specTokens": 5}}
        assert effective_profile(profile, edited).proposer.num_speculative_tokens == 4

    @pytest.mark.parametrize("forged", [100000, 0, -3, 9])
    def test_a_status_edit_outside_the_retune_bounds_is_not_applied(
        self, forged: int, caplog: pytest.LogCaptureFixture
    ) -> None:
        # whoever may patch status/ is not the loop: max_tokens defaults to 8
        profile = parse_profile(profile_text(policy="{mode: retune}"))
        forged_status = {"loop": {"numSpeculativeTokens": forged, "specTokens": 4}}
        with caplog.at_level(logging.WARNING, logger="specdeploy.operator"):
            assert effective_profile(profile, forged_status).proposer.num_speculative_tokens == 4
        assert f"numSpeculativeTokens={forged} is outside policy.retune's 1..8" in caplog.text

    def test_gateway_gets_a_weighted_httproute_to_both_twins(self) -> None:
        text = profile_text(policy="{mode: switch, gateway: {name: inference, namespace: gw}}")
        plan = plan_resource(body(text), InClusterCheckpoints(offline=True))
        assert isinstance(plan, DeploymentPlan)
        owner = Owner("demo", "llm", "uid-1")
        [route] = [m for m in owned_manifests(plan, owner, "baseline") if m.kind == "HTTPRoute"]
        assert route.body["spec"]["parentRefs"] == [{"name": "inference", "namespace": "gw"}]
        [rule] = route.body["spec"]["rules"]
        assert rule["backendRefs"] == [
            {"name": "demo", "port": 8000, "weight": 0},
            {"name": "demo-baseline", "port": 8000, "weight": 100},
        ]
        assert route.body["metadata"]["ownerReferences"][0]["uid"] == "uid-1"

    def test_exploring_splits_by_weight_or_by_pod_and_a_reconcile_keeps_it(self) -> None:
        explore = "{mode: switch, explore_percent: 10, gateway: {name: inference}}"
        plan = plan_resource(body(profile_text(policy=explore)), InClusterCheckpoints(offline=True))
        assert isinstance(plan, DeploymentPlan)
        owner = Owner("demo", "llm", "uid-1")
        status = {"loop": {"active": "speculative", "explore": {"percent": 10, "since": 5.0}}}
        share = exploring(plan.profile, status)
        assert share == 10
        manifests = owned_manifests(plan, owner, "speculative", share)
        [route] = [m for m in manifests if m.kind == "HTTPRoute"]
        assert [r["weight"] for r in route.body["spec"]["rules"][0]["backendRefs"]] == [90, 10]
        assert traffic_status(plan.profile, "speculative", share)["share"] == "90%"
        front = plan_resource(
            body(profile_text(policy="{mode: switch, explore_percent: 50}")),
            InClusterCheckpoints(offline=True),
        )
        assert isinstance(front, DeploymentPlan)
        [service] = [
            m for m in owned_manifests(front, owner, "speculative", 50) if m.name == "demo-front"
        ]
        # both twins' pods: kube-proxy spreads connections over them, half each
        assert service.body["spec"]["selector"] == {"specdeploy.io/profile": "demo"}
        [alone] = [
            m for m in owned_manifests(front, owner, "speculative") if m.name == "demo-front"
        ]
        assert alone.body["spec"]["selector"]["specdeploy.io/variant"] == "speculative"


class TestOperatorCommand:
    def test_an_unreachable_cluster_is_exit_6(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from tests.hostile.test_kube_api import closed_port
        from tests.operator.fake_api import kubeconfig_text

        config = tmp_path / "kubeconfig"
        config.write_text(kubeconfig_text(closed_port()))
        monkeypatch.setenv("KUBECONFIG", str(config))
        result = CliRunner().invoke(cli, ["operator"])
        assert result.exit_code == 6, result.output
        assert "fix:" in result.output and "Traceback" not in result.output

    def test_a_cluster_without_the_crd_says_how_to_install_it(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from tests.operator.fake_api import ApiServer, FakeCluster, kubeconfig_text

        cluster = FakeCluster(refuse={"/apis/specdeploy.io": 404})
        server = ApiServer(cluster)
        try:
            config = tmp_path / "kubeconfig"
            config.write_text(kubeconfig_text(server.url))
            monkeypatch.setenv("KUBECONFIG", str(config))
            result = CliRunner().invoke(cli, ["operator"])
        finally:
            server.close()
        assert result.exit_code == 6, result.output
        assert "does not serve SpeculativeDeployment" in result.output
        assert "--print-crd | kubectl apply -f -" in result.output
