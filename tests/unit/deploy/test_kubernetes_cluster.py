"""apply / status / delete against the loopback fake API server (tests/unit/deploy/fake_kube.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from orchestrator.deploy.kubernetes_cluster import FIELD_MANAGER, KubernetesCluster
from orchestrator.emitters.kubernetes import manifests_for
from orchestrator.errors import DeployError
from tests.support import REPO_ROOT
from tests.unit.deploy.fake_kube import FakeKube
from tests.unit.manifests.conftest import valid_plan

PROFILE = REPO_ROOT / "profiles" / "vllm-qwen3-4b-draft.yaml"  # namespace llm, baseline twin


def plan_and_manifests(path: Path = PROFILE) -> tuple[Any, list[Any]]:
    plan = valid_plan(path)
    return plan, manifests_for(plan)


class TestApply:
    def test_creates_in_apply_order_with_the_field_manager(
        self, cluster: KubernetesCluster, fake_kube: FakeKube
    ) -> None:
        _, manifests = plan_and_manifests()
        results = cluster.apply(manifests)
        assert [r.action for r in results] == ["created"] * len(manifests)
        patches = [path for method, path in fake_kube.requests if method == "PATCH"]
        assert all(f"fieldManager={FIELD_MANAGER}" in p for p in patches)
        kinds = [p.split("/")[-2] for p in patches]
        assert kinds == ["services", "services", "deployments", "deployments"]
        stored = fake_kube.objects[("apis/apps/v1", "deployments", "llm", "qwen3-4b-draft")]
        assert stored["metadata"]["managedFields"][0]["manager"] == FIELD_MANAGER

    def test_reapplying_an_unchanged_profile_changes_nothing(
        self, cluster: KubernetesCluster, fake_kube: FakeKube
    ) -> None:
        _, manifests = plan_and_manifests()
        cluster.apply(manifests)
        versions = {k: o["metadata"]["resourceVersion"] for k, o in fake_kube.objects.items()}
        again = cluster.apply(manifests)
        assert [r.action for r in again] == ["unchanged"] * len(manifests)
        assert all(r.diff == "" for r in again)
        assert versions == {
            k: o["metadata"]["resourceVersion"] for k, o in fake_kube.objects.items()
        }

    def test_a_change_is_configured_and_shown_as_a_diff(
        self, cluster: KubernetesCluster, fake_kube: FakeKube
    ) -> None:
        _, manifests = plan_and_manifests()
        cluster.apply(manifests)
        deployment = next(m for m in manifests if m.kind == "Deployment")
        deployment.body["spec"]["replicas"] = 3
        results = {(r.kind, r.name): r for r in cluster.apply(manifests)}
        changed = results[("Deployment", deployment.name)]
        assert changed.action == "configured"
        assert "-  replicas: 1" in changed.diff and "+  replicas: 3" in changed.diff

    def test_server_dry_run_persists_nothing(
        self, cluster: KubernetesCluster, fake_kube: FakeKube
    ) -> None:
        _, manifests = plan_and_manifests()
        results = cluster.apply(manifests, server_dry_run=True)
        assert [r.action for r in results] == ["created"] * len(manifests)
        assert fake_kube.objects == {}
        assert all("dryRun=All" in p for m, p in fake_kube.requests if m == "PATCH")

    def test_missing_lws_crd_is_explained(
        self, cluster: KubernetesCluster, fake_kube: FakeKube, tmp_path: Path
    ) -> None:
        fake_kube.lws_installed = False
        from tests.support import write_profile

        plan = valid_plan(write_profile(tmp_path, hardware={"tensor_parallel_size": 16}))
        cluster2 = _fresh(cluster)
        with pytest.raises(DeployError, match="no LeaderWorkerSet API") as err:
            cluster2.apply(manifests_for(plan))
        assert err.value.exit_code == 6 and "install LeaderWorkerSet" in err.value.fix

    def test_refusal_is_a_deploy_error_with_what_why_fix(
        self, cluster: KubernetesCluster, fake_kube: FakeKube
    ) -> None:
        fake_kube.refuse["/deployments/"] = 403
        _, manifests = plan_and_manifests()
        with pytest.raises(DeployError, match="HTTP 403") as err:
            cluster.apply(manifests)
        assert "refused by the fake" in err.value.why and "RBAC" in err.value.fix

    def test_a_refusal_midway_names_what_is_already_in_the_cluster(
        self, cluster: KubernetesCluster, fake_kube: FakeKube
    ) -> None:
        fake_kube.refuse["/deployments/"] = 403
        _, manifests = plan_and_manifests()
        landed = []
        with pytest.raises(DeployError) as err:
            for result in cluster.apply_each(manifests):
                landed.append(f"{result.kind.lower()}/{result.name}")
        assert landed == ["service/qwen3-4b-draft", "service/qwen3-4b-draft-baseline"]
        assert "2 of 4 objects were applied before this one" in err.value.why
        assert all(name in err.value.why for name in landed)
        assert "specdeploy delete" in err.value.fix


class TestConflicts:
    """Fields another manager owns are not taken silently (server-side apply without force)."""

    KEY = ("apis/apps/v1", "deployments", "llm", "qwen3-4b-draft")

    def test_a_field_changed_by_another_manager_is_a_conflict_naming_both(
        self, cluster: KubernetesCluster, fake_kube: FakeKube
    ) -> None:
        _, manifests = plan_and_manifests()
        cluster.apply(manifests)
        fake_kube.update(self.KEY, "spec.replicas", 3, manager="kubectl-edit")
        with pytest.raises(DeployError) as err:
            cluster.apply(manifests)
        assert err.value.exit_code == 6
        assert '"kubectl-edit"' in err.value.what and ".spec.replicas" in err.value.what
        assert "--force-conflicts" in err.value.fix
        assert fake_kube.objects[self.KEY]["spec"]["replicas"] == 3  # nothing taken
        patch = [p for m, p in fake_kube.requests if m == "PATCH"][-1]
        assert "force=" not in patch

    def test_force_conflicts_takes_the_field_over(
        self, cluster: KubernetesCluster, fake_kube: FakeKube
    ) -> None:
        _, manifests = plan_and_manifests()
        cluster.apply(manifests)
        fake_kube.update(self.KEY, "spec.replicas", 3, manager="kubectl-edit")
        results = cluster.apply(manifests, force_conflicts=True)
        changed = next(r for r in results if r.kind == "Deployment" and r.name == self.KEY[3])
        assert changed.action == "configured" and "-  replicas: 3" in changed.diff
        stored = fake_kube.objects[self.KEY]
        assert stored["spec"]["replicas"] == 1
        managers = {e["manager"] for e in stored["metadata"]["managedFields"]}
        assert managers == {FIELD_MANAGER}

    def test_fields_only_another_manager_sets_are_left_alone(
        self, cluster: KubernetesCluster, fake_kube: FakeKube
    ) -> None:
        _, manifests = plan_and_manifests()
        cluster.apply(manifests)
        fake_kube.update(self.KEY, "metadata.annotations.team/owner", "ml", manager="kubectl")
        results = cluster.apply(manifests)
        assert {r.action for r in results} == {"unchanged"}
        assert fake_kube.objects[self.KEY]["metadata"]["annotations"]["team/owner"] == "ml"


def _fresh(cluster: KubernetesCluster) -> KubernetesCluster:
    """A new client, so discovery sees the fake's current API groups."""
    from kubernetes import client

    configuration = client.Configuration()
    configuration.host = cluster.server
    return KubernetesCluster(namespace="default", api_client=client.ApiClient(configuration))


class TestDelete:
    def test_deletes_only_objects_labelled_for_this_profile(
        self, cluster: KubernetesCluster, fake_kube: FakeKube
    ) -> None:
        plan, manifests = plan_and_manifests()
        cluster.apply(manifests)
        stranger = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "not-ours", "namespace": "llm"},
        }
        other_profile = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": "other",
                "namespace": "llm",
                "labels": {
                    "app.kubernetes.io/managed-by": "specdeploy",
                    "specdeploy.io/profile": "other",
                },
            },
        }
        fake_kube.add("api/v1", "configmaps", stranger)
        fake_kube.add("api/v1", "services", other_profile)
        deleted = cluster.delete(plan.profile)
        assert sorted(deleted) == sorted((m.kind, m.name) for m in manifests)
        assert set(fake_kube.objects) == {
            ("api/v1", "configmaps", "llm", "not-ours"),
            ("api/v1", "services", "llm", "other"),
        }


def pod(
    name: str, *, conditions: list[Any] | None = None, containers: list[Any] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "llm",
            "labels": {
                "app.kubernetes.io/managed-by": "specdeploy",
                "specdeploy.io/profile": "qwen3-4b-draft",
            },
        },
        "status": {
            "phase": "Pending" if containers is None else "Running",
            "conditions": conditions or [],
            "containerStatuses": containers or [],
        },
    }


class TestStatus:
    def test_names_the_cause_for_each_failure_kind(
        self, cluster: KubernetesCluster, fake_kube: FakeKube
    ) -> None:
        plan, manifests = plan_and_manifests()
        cluster.apply(manifests)
        unschedulable = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
        fake_kube.add(
            "api/v1",
            "pods",
            pod(
                "gpu-starved",
                conditions=[
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": unschedulable,
                    }
                ],
            ),
        )
        fake_kube.add(
            "api/v1",
            "pods",
            pod(
                "bad-image",
                containers=[
                    {
                        "name": "engine",
                        "ready": False,
                        "state": {
                            "waiting": {
                                "reason": "ImagePullBackOff",
                                "message": 'Back-off pulling image "vllm/vllm-openai:v9"',
                            }
                        },
                    }
                ],
            ),
        )
        fake_kube.add(
            "api/v1",
            "pods",
            pod(
                "oom",
                containers=[
                    {
                        "name": "engine",
                        "ready": False,
                        "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                        "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137}},
                    }
                ],
            ),
        )
        fake_kube.add(
            "api/v1",
            "pods",
            pod(
                "crashing",
                containers=[
                    {
                        "name": "engine",
                        "ready": False,
                        "state": {
                            "waiting": {
                                "reason": "CrashLoopBackOff",
                                "message": "back-off 5m0s restarting failed container",
                            }
                        },
                        "lastState": {"terminated": {"reason": "Error", "exitCode": 1}},
                    }
                ],
            ),
        )
        fake_kube.logs["crashing"] = "loading model\nValueError: unrecognized arguments: --bogus\n"
        report = cluster.status(plan.profile)
        causes = {p.name: p.causes for p in report.pods}
        assert causes["gpu-starved"][0].reason == "InsufficientGPU"
        assert "Insufficient nvidia.com/gpu" in causes["gpu-starved"][0].message
        assert causes["bad-image"][0].reason == "ImagePullBackOff"
        assert "engine.image" in causes["bad-image"][0].fix
        assert causes["oom"][0].reason == "OOMKilled"
        assert causes["crashing"][0].reason == "CrashLoopBackOff"
        assert causes["crashing"][0].log_tail[-1] == "ValueError: unrecognized arguments: --bogus"
        text = "\n".join(report.lines())
        assert "Deployment/qwen3-4b-draft: 0/1 ready" in text and "fix:" in text
        assert not report.ready

    def test_scheduling_cause_from_events(
        self, cluster: KubernetesCluster, fake_kube: FakeKube
    ) -> None:
        plan, manifests = plan_and_manifests()
        cluster.apply(manifests)
        fake_kube.add("api/v1", "pods", pod("waiting"))
        fake_kube.add(
            "api/v1",
            "events",
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": "waiting.1", "namespace": "llm"},
                "involvedObject": {"kind": "Pod", "name": "waiting"},
                "reason": "FailedScheduling",
                "message": "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.",
            },
        )
        (waiting,) = cluster.status(plan.profile).pods
        assert waiting.causes[0].reason == "InsufficientGPU"

    def test_wait_returns_when_ready_and_times_out_with_causes(
        self, cluster: KubernetesCluster, fake_kube: FakeKube
    ) -> None:
        plan, manifests = plan_and_manifests()
        cluster.apply(manifests)
        lines: list[str] = []
        with pytest.raises(DeployError, match="not ready") as err:
            cluster.wait(plan.profile, timeout=0, echo=lines.append, interval=0)
        assert "0/1 ready" in err.value.why and lines
        for obj in fake_kube.objects.values():
            if obj["kind"] == "Deployment":
                obj["status"] = {"readyReplicas": 1}
        report = cluster.wait(plan.profile, timeout=5, echo=lines.append, interval=0)
        assert report.ready and "1/1 ready" in lines[-1]
