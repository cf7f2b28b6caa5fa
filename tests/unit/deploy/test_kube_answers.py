"""Each answer of the API server as a user needs it, against the imitation (tests/kube/README.md),
which answers as the recorded 1.36 kube-apiserver did: typed-patch 500s, 422 causes mapped to
profile fields, transient answers retried within --request-timeout, and the diff of what the
server stores."""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import pytest

from orchestrator.deploy.kube.errors import profile_field
from orchestrator.deploy.kubernetes_cluster import KubernetesCluster, object_diff
from orchestrator.emitters.kubernetes import manifests_for
from orchestrator.errors import DeployError
from tests.kube.cluster import Cluster
from tests.support import REPO_ROOT, write_profile
from tests.unit.manifests.conftest import valid_plan

PROFILE = REPO_ROOT / "profiles" / "vllm-qwen3-4b-draft.yaml"  # namespace llm, baseline twin


def connect(imitation: Cluster, *, request_timeout: float = 30.0) -> KubernetesCluster:
    from kubernetes import config

    api_client = config.new_client_from_config(config_file=str(imitation.kubeconfig))
    return KubernetesCluster(
        namespace="llm", api_client=api_client, request_timeout=request_timeout
    )


@pytest.fixture
def llm(imitation: Cluster) -> Cluster:
    imitation.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "llm"}})
    return imitation


def requests_to(imitation: Cluster, fragment: str, method: str = "") -> list[Any]:
    server = imitation.need_imitation("counts requests")
    return [r for r in server.requests if method in r.method and fragment in r.path]


class TestWhatTheServerStores:
    def test_an_unchanged_profile_applied_twice_shows_no_diff(self, llm: Cluster) -> None:
        manifests = manifests_for(valid_plan(PROFILE))
        cluster = connect(llm)
        assert {r.action for r in cluster.apply(manifests)} == {"created"}
        again = cluster.apply(manifests)
        assert [(r.action, r.diff) for r in again] == [("unchanged", "")] * len(manifests)

    def test_server_dry_run_of_an_unchanged_profile_says_unchanged(self, llm: Cluster) -> None:
        manifests = manifests_for(valid_plan(PROFILE))
        cluster = connect(llm)
        cluster.apply(manifests)
        dry = cluster.apply(manifests, server_dry_run=True)
        assert [(r.action, r.diff) for r in dry] == [("unchanged", "")] * len(manifests)

    def test_empty_lists_the_server_dropped_are_no_change(self) -> None:
        body = {"spec": {"initContainers": [], "containers": [{"name": "e", "env": []}]}}
        live = {"spec": {"containers": [{"name": "e", "image": "defaulted"}]}}
        assert object_diff(live, body, "d.yaml") == ""

    def test_empty_lists_a_custom_resource_keeps_are_compared(self) -> None:
        body = {"spec": {"env": []}}
        assert object_diff({"spec": {"env": []}}, body, "lws.yaml") == ""
        assert "-  env:\n-  - name: X" in object_diff(
            {"spec": {"env": [{"name": "X"}]}}, body, "lws.yaml"
        )

    def test_a_value_the_profile_adds_is_still_a_diff(self) -> None:
        body = {"spec": {"env": [{"name": "X"}]}}
        assert "+  - name: X" in object_diff({"spec": {}}, body, "d.yaml")


class TestRetries:
    def test_a_503_is_retried_until_it_passes(self, llm: Cluster) -> None:
        manifests = manifests_for(valid_plan(PROFILE))
        server = llm.need_imitation("injects faults")
        cluster = connect(llm)
        server.faults.append(["/deployments/", 503, 2])
        assert {r.action for r in cluster.apply(manifests)} == {"created"}
        answered = [r.status for r in requests_to(llm, "/deployments/")]
        assert answered[:3] == [503, 503, 404]  # then the GET finds nothing, and it is created

    def test_a_429_waits_as_long_as_retry_after_says(self, llm: Cluster) -> None:
        manifests = manifests_for(valid_plan(PROFILE))
        server = llm.need_imitation("injects faults")
        cluster = connect(llm)
        server.faults.append(["/services/", 429, 1])  # the imitation sends Retry-After: 1
        start = time.monotonic()
        cluster.apply(manifests)
        assert time.monotonic() - start >= 1.0
        assert requests_to(llm, "/services/")[0].status == 429

    def test_a_503_that_lasts_fails_within_the_request_timeout(self, llm: Cluster) -> None:
        manifests = manifests_for(valid_plan(PROFILE))
        server = llm.need_imitation("injects faults")
        cluster = connect(llm, request_timeout=1.0)
        server.faults.append(["/services/", 503, 1000])
        start = time.monotonic()
        with pytest.raises(DeployError) as err:
            cluster.apply(manifests)
        assert time.monotonic() - start < 3.0
        assert err.value.exit_code == 6
        assert "HTTP 503" in err.value.what and "busy or unavailable" in err.value.what
        tries = len(requests_to(llm, "/services/"))
        assert tries >= 3 and f"after {tries} attempts" in err.value.why
        assert "--request-timeout" in err.value.fix

    @pytest.mark.parametrize("code", [500, 422, 403, 400])
    def test_other_answers_are_not_retried(self, llm: Cluster, code: int) -> None:
        manifests = manifests_for(valid_plan(PROFILE))
        server = llm.need_imitation("injects faults")
        cluster = connect(llm)
        server.faults.append(["/services/", code, 5])
        with pytest.raises(DeployError, match=f"HTTP {code}"):
            cluster.apply(manifests)
        assert len(requests_to(llm, "/services/")) == 1


def old_lws_crd() -> dict[str, Any]:
    """A LeaderWorkerSet CRD older than what specdeploy renders: no leaderWorkerTemplate."""
    schema = {
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {"replicas": {"type": "integer"}}}},
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "leaderworkersets.leaderworkerset.x-k8s.io"},
        "spec": {
            "group": "leaderworkerset.x-k8s.io",
            "names": {
                "kind": "LeaderWorkerSet",
                "listKind": "LeaderWorkerSetList",
                "plural": "leaderworkersets",
                "singular": "leaderworkerset",
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                    "subresources": {"status": {}},
                }
            ],
        },
    }


class TestTypedPatch:
    def test_an_older_crd_names_the_crd_and_the_release_and_is_not_retried(
        self, llm: Cluster, tmp_path: Path
    ) -> None:
        llm.install_crd_documents([old_lws_crd()])
        plan = valid_plan(write_profile(tmp_path, hardware={"tensor_parallel_size": 16}))
        cluster = connect(llm)
        with pytest.raises(DeployError) as err:
            cluster.apply(manifests_for(plan))
        crd = "leaderworkersets.leaderworkerset.x-k8s.io"
        assert f"the installed CRD {crd} is older than what specdeploy renders" in err.value.what
        assert "field not declared in schema" in err.value.why
        assert f"upgrade the CRD {crd} to LeaderWorkerSet v0.7.0" in err.value.fix
        assert "fix what the API server names" not in err.value.fix
        assert len(requests_to(llm, "/leaderworkersets/", "PATCH")) == 1

    def test_a_built_in_kind_names_the_cluster_schema(self, llm: Cluster) -> None:
        manifests = manifests_for(valid_plan(PROFILE))
        deployment = next(m for m in manifests if m.kind == "Deployment")
        deployment.body["spec"]["replicas"] = "two"
        with pytest.raises(DeployError) as err:
            connect(llm).apply([deployment])
        assert "Deployment schema lacks what specdeploy renders" in err.value.what
        assert "expected numeric" in err.value.why
        assert len(requests_to(llm, "/deployments/", "PATCH")) == 1


class TestInvalid:
    def test_each_cause_is_listed_with_its_profile_field(self, llm: Cluster) -> None:
        manifests = manifests_for(valid_plan(PROFILE))
        deployment = copy.deepcopy(next(m for m in manifests if m.kind == "Deployment"))
        deployment.body["spec"]["replicas"] = -1
        with pytest.raises(DeployError) as err:
            connect(llm).apply([deployment])
        assert "HTTP 422" in err.value.what
        assert "spec.replicas:" in err.value.why and "(from deploy.replicas" in err.value.why
        assert "change deploy.replicas" in err.value.fix

    @pytest.mark.parametrize(
        ("kind", "path", "field"),
        [
            ("HTTPRoute", "spec.parentRefs[0].namespace", "deploy.gateway"),
            ("Service", "metadata.name", "metadata.name"),
            ("Deployment", "metadata.namespace", "metadata.namespace"),
            ("Deployment", "spec.template.spec.containers[0].image", "engine.image"),
            ("Deployment", "spec.template.spec.containers[0].args[3]", "serving.extra_args"),
            ("PersistentVolumeClaim", "spec.storageClassName", "deploy.model_cache.storage_class"),
            (
                "Deployment",
                "spec.template.spec.volumes[1].secret.secretName",
                "deploy.hf_token_secret",
            ),
            ("Deployment", "spec.template.spec.nodeSelector", "hardware.gpu"),
            ("Deployment", "spec.replicas", "deploy.replicas"),
        ],
    )
    def test_object_paths_map_to_profile_fields(self, kind: str, path: str, field: str) -> None:
        assert field in (profile_field(kind, path) or "")

    def test_an_unknown_path_maps_to_nothing(self) -> None:
        assert profile_field("Deployment", "spec.minReadySeconds") is None


class FakeResponse:
    def __init__(self, status: int, retry_after: str | None = None) -> None:
        self.status = status
        self.headers = {"Retry-After": retry_after} if retry_after else {}

    def read(self) -> bytes:
        return b""


class TestRetryingAlone:
    """`Retrying` with a fake clock: backoff, Retry-After and the budget, without waiting."""

    def make(self, timeout: float = 30.0) -> tuple[Any, list[float]]:
        from orchestrator.deploy.kube.client import Retrying

        now = [0.0]
        slept: list[float] = []

        def sleep(seconds: float) -> None:
            slept.append(seconds)
            now[0] += seconds

        return Retrying(timeout, sleep=sleep, clock=lambda: now[0]), slept

    def test_backoff_doubles_and_retry_after_wins(self) -> None:
        retrying, slept = self.make()
        answers = iter(
            [FakeResponse(503), FakeResponse(503), FakeResponse(429, "3"), FakeResponse(200)]
        )
        assert retrying.call(lambda *a, **k: next(answers), (), {}, None).status == 200
        assert slept == [0.25, 0.5, 3.0] and retrying.attempts == 4

    def test_the_budget_ends_the_retries(self) -> None:
        retrying, slept = self.make(timeout=2.0)
        assert retrying.call(lambda *a, **k: FakeResponse(503), (), {}, None).status == 503
        assert sum(slept) < 2.0 and retrying.attempts == len(slept) + 1

    def test_a_reset_mid_session_is_retried_a_first_refusal_is_not(self) -> None:
        retrying, _ = self.make()
        calls: list[int] = []

        def refused(*args: Any, **kwargs: Any) -> Any:
            calls.append(1)
            raise ConnectionRefusedError("Connection refused")

        with pytest.raises(ConnectionRefusedError):
            retrying.call(refused, (), {}, None)
        assert len(calls) == 1  # nothing listens there: fail at once
        answers: list[Any] = [FakeResponse(200), ConnectionResetError("reset"), FakeResponse(200)]

        def flaky(*args: Any, **kwargs: Any) -> Any:
            answer = answers.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return answer

        retrying.call(flaky, (), {}, None)  # the server answers: the session is up
        assert retrying.call(flaky, (), {}, None).status == 200
        assert retrying.attempts == 2

    def test_a_timeout_is_not_retried(self) -> None:
        retrying, slept = self.make()
        retrying.reached = True

        def slow(*args: Any, **kwargs: Any) -> Any:
            raise TimeoutError("read timed out")

        with pytest.raises(TimeoutError):
            retrying.call(slow, (), {}, None)
        assert retrying.attempts == 1 and slept == []


class TestThroughTheCli:
    def test_apply_twice_then_server_dry_run_says_unchanged_without_a_diff(
        self, llm: Cluster
    ) -> None:
        from click.testing import CliRunner

        from orchestrator.cli import cli
        from tests.kube.fixtures import kubeconfig_env

        env = kubeconfig_env(llm.kubeconfig)
        apply = ["apply", str(PROFILE), "--offline"]
        assert CliRunner().invoke(cli, apply, env=env).exit_code == 0
        again = CliRunner().invoke(cli, apply, env=env)
        dry = CliRunner().invoke(cli, [*apply, "--server-dry-run"], env=env)
        for result in (again, dry):
            assert result.exit_code == 0, result.output
            assert "configured" not in result.output and "---" not in result.output
        assert "deployment/qwen3-4b-draft unchanged (server dry run)" in dry.output

    def test_a_70_character_gateway_namespace_is_mapped_to_deploy_gateway(
        self, llm: Cluster, tmp_path: Path
    ) -> None:
        llm.install_platform_crds("gateway-api")
        plan = valid_plan(
            write_profile(
                tmp_path,
                metadata={"name": "ab", "namespace": "llm"},
                deploy={"baseline": True, "baseline_traffic_percent": 10, "gateway": "infra/gw"},
            )
        )
        route = next(m for m in manifests_for(plan) if m.kind == "HTTPRoute")
        route.body["spec"]["parentRefs"][0]["namespace"] = "a" * 70  # validate refuses this
        with pytest.raises(DeployError) as err:
            connect(llm).apply([route])
        assert "HTTP 422" in err.value.what
        assert "spec.parentRefs[0].namespace" in err.value.why
        assert "(from deploy.gateway" in err.value.why and "change deploy.gateway" in err.value.fix
