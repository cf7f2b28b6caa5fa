"""The admins' lists: which images and Secrets a tenant's resource may name (issue 21, point 5).

Planned in process (`plan_resource`, as the operator's handlers plan), and once through a real
`specdeploy operator` against the loopback API server: refused before anything is applied, with
a condition, findings and a Warning Event that say what, why and how to fix.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.operator.admission import IMAGES_ENV, SECRETS_ENV, Admission
from orchestrator.operator.crd import as_resource
from orchestrator.operator.reconcile import plan_resource
from orchestrator.operator.source import InClusterCheckpoints
from orchestrator.plan.types import DeploymentPlan, RejectedPlan
from tests.operator.conftest import (
    CR,
    NAME,
    Operator,
    condition,
    events,
    helm_run,
    resource,
    status_of,
    wait_for,
)
from tests.operator.fake_api import FakeCluster
from tests.support import REPO_ROOT

BASE = {
    "apiVersion": "specdeploy.io/v1",
    "kind": "SpeculativeDeployment",
    "metadata": {"name": "demo", "namespace": "llm", "uid": "u", "generation": 1},
    "engine": {"name": "vllm", "version": "0.32.0"},
    "target": {"model": "Qwen/Qwen3-8B", "revision": "b968826d9c46dd6066d109eabc6255188de91218"},
    "proposer": {"method": "ngram", "num_speculative_tokens": 4},
    "hardware": {"gpu": "L40S"},
    "serving": {"max_model_len": 8192, "max_concurrency": 8},
}


def planned(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], **blocks: Any) -> Any:
    for name in (IMAGES_ENV, SECRETS_ENV):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    body = copy.deepcopy(BASE)
    for key, value in blocks.items():
        body[key] = {**body.get(key, {}), **value}
    return plan_resource(as_resource(body), InClusterCheckpoints(offline=True))


def rules(result: Any) -> list[str]:
    assert isinstance(result, RejectedPlan), result
    return [f.rule for f in result.errors]


class TestImages:
    def test_the_official_image_needs_no_list(self, monkeypatch: pytest.MonkeyPatch) -> None:
        assert isinstance(planned(monkeypatch, {}), DeploymentPlan)

    def test_any_other_image_is_refused_by_default(self, monkeypatch: pytest.MonkeyPatch) -> None:
        result = planned(monkeypatch, {}, engine={"image": "evil.example/miner:1"})
        assert rules(result) == ["operator.image-not-allowed"]
        [finding] = result.errors
        assert finding.field == "engine.image" and "'evil.example/miner:1'" in finding.what
        assert "none besides the engines' official images" in finding.what
        assert "admission.allowedImages" in finding.fix and "remove engine.image" in finding.fix

    @pytest.mark.parametrize(
        ("image", "allowed"),
        [
            ("registry.example.com/vllm:0.32.0", True),
            ("registry.example.com.evil/vllm:0.32.0", False),  # a glob over the whole reference
            ("docker.io/vllm/vllm-openai:v0.32.0", True),
            ("docker.io/vllm/vllm-openai:latest", False),
        ],
    )
    def test_a_glob_over_the_whole_reference(
        self, monkeypatch: pytest.MonkeyPatch, image: str, allowed: bool
    ) -> None:
        env = {IMAGES_ENV: "registry.example.com/*, docker.io/vllm/vllm-openai:v0.*"}
        result = planned(monkeypatch, env, engine={"image": image})
        assert isinstance(result, DeploymentPlan) is allowed, result.findings


class TestSecrets:
    def test_no_secret_is_allowed_by_default(self, monkeypatch: pytest.MonkeyPatch) -> None:
        result = planned(monkeypatch, {}, deploy={"hf_token_secret": "prod-db"})
        assert rules(result) == ["operator.secret-not-allowed"]
        [finding] = result.errors
        assert finding.field == "deploy.hf_token_secret" and "(allowed: none)" in finding.what

    def test_a_listed_secret_is_allowed_and_another_is_not(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        env = {SECRETS_ENV: "hf-token"}
        assert isinstance(
            planned(monkeypatch, env, deploy={"hf_token_secret": "hf-token"}), DeploymentPlan
        )
        result = planned(monkeypatch, env, deploy={"hf_token_secret": "hf-token-2"})
        assert rules(result) == ["operator.secret-not-allowed"]

    def test_both_refusals_come_with_the_profiles_own_errors(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        result = planned(
            monkeypatch,
            {},
            engine={"image": "x/y:1"},
            deploy={"hf_token_secret": "s"},
            serving={"max_model_len": 8192, "max_concurrency": 8, "port": 22},
        )
        assert {"operator.image-not-allowed", "operator.secret-not-allowed"} <= set(rules(result))


def test_flags_add_to_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(IMAGES_ENV, "a/*")
    given = Admission.from_env()
    assert given.images == ("a/*",) and given.secrets == ()
    assert Admission.from_env({IMAGES_ENV: " , ,b/*,", SECRETS_ENV: "x"}).images == ("b/*",)
    result = CliRunner().invoke(cli, ["operator", "--help"])
    assert "--allow-image" in result.output and "--allow-secret" in result.output


def test_the_chart_carries_both_lists(helm: list[str]) -> None:
    chart = str(REPO_ROOT / "charts" / "specdeploy-operator")
    rendered = helm_run(helm, "template", "x", chart, "--set", "admission.allowedImages={r.io/*}")
    [deployment] = [d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "Deployment"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env[IMAGES_ENV] == "r.io/*" and env[SECRETS_ENV] == "hf-token"


def test_the_operator_refuses_before_applying_and_says_so(
    api: FakeCluster, operator: Operator
) -> None:
    api.put(*CR, resource(engine={"name": "vllm", "version": "0.32.0", "image": "evil/miner:1"}))
    status = wait_for(
        "the resource refused", lambda: (s := status_of(api)).get("verdict") and s, operator
    )
    validated = condition(status, "Validated")
    assert validated["status"] == "False" and validated["reason"] == "NotAllowed"
    assert "operator.image-not-allowed" in validated["message"]
    [event] = wait_for("a NotAllowed event", lambda: events(api, "NotAllowed"), operator)
    assert event["type"] == "Warning" and "evil/miner:1" in event["message"]
    assert api.list("apis/apps/v1", "deployments") == []  # nothing applied
    assert NAME in operator.output()  # and its own log says so
