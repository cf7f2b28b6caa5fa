"""The replay test: every request recorded against a real kube-apiserver
(../shared/referees/kube-apiserver/README.md) sent again, and the answer compared with the
recording (status, reason, message, causes).

It runs on the e2e suite's cluster: the imitation in the default run, a real cluster with
SPECDEPLOY_E2E_KUBECONFIG. The recorded strings are read from the recording at test time; a "…"
in them stands for anything.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.kubernetes import recording
from tests.e2e.kubernetes.recording import matches
from tests.kube.cluster import Cluster, read_documents, referee
from tests.kube.controllers import node_body

GROUP = "test.specdeploy.invalid"
CRD_NAME = f"modeldeployments.{GROUP}"
APPLY = "application/apply-patch+yaml"


def model_deployment_crd() -> dict[str, Any]:
    """The recording's CRD: `spec.model` (string, required), `spec.replicas` (integer, minimum 0)."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD_NAME},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": "modeldeployments", "singular": "modeldeployment", "kind": "ModelDeployment"},
            "versions": [{
                "name": "v1alpha1", "served": True, "storage": True,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
                    "type": "object", "required": ["model"],
                    "properties": {"model": {"type": "string"}, "replicas": {"type": "integer", "minimum": 0}},
                }}}},
            }],
        },
    }  # fmt: skip


@pytest.fixture(scope="module")
def model_crd(kube: Cluster) -> Iterator[None]:
    kube.install_crd_documents([model_deployment_crd()])
    yield
    kube.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition", CRD_NAME)


def apply(
    kube: Cluster, path: str, body: dict[str, Any], manager: str | None = "specdeploy", **query: str
) -> tuple[int, Any]:
    params = {"fieldManager": manager, **query} if manager else dict(query)
    return kube.raw("PATCH", path, body, content_type=APPLY, query=params)


def model(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": name},
        "spec": spec,
    }


def model_path(namespace: str, name: str) -> str:
    return f"/apis/{GROUP}/v1alpha1/namespaces/{namespace}/modeldeployments/{name}"


def deployment(name: str, **spec: Any) -> dict[str, Any]:
    container = {
        "name": "engine",
        "image": "registry.invalid/engine:1",
        **spec.pop("container", {}),
    }
    pod = {"containers": [container], **spec.pop("pod", {})}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod},
            **spec,
        },
    }


def deployment_path(namespace: str, name: str) -> str:
    return f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}"


def assert_recorded(
    answer: tuple[int, Any], row: recording.Row, message: str | None = None
) -> None:
    """Status, reason, message and causes as the row records them."""
    code, body = answer
    assert code == row.code, body
    assert body.get("reason", "") == row.reason, body
    assert matches(message or row.message, body["message"]), (
        f"{body['message']!r} is not {row.message!r}"
    )
    wanted = recording.causes(row.body)
    got = (body.get("details") or {}).get("causes") or []
    if wanted:
        assert [{k: c.get(k) for k in w} for c, w in zip(got, wanted, strict=False)] == wanted, got
        assert len(got) == len(wanted), got
    if "no `causes`" in row.body:
        assert got == [], got


class TestTypedPatch:
    """The 500s: a typed patch the API server cannot build. No reason, no causes."""

    def test_a_value_of_the_wrong_type(
        self, kube: Cluster, kube_namespace: str, model_crd: None
    ) -> None:
        row = recording.row('replicas: "two"')
        answer = apply(
            kube, model_path(kube_namespace, "bad"), model("bad", {"model": "m", "replicas": "two"})
        )
        assert_recorded(answer, row)
        assert "details" not in answer[1] or not answer[1]["details"].get("causes")

    def test_a_value_of_the_wrong_type_on_a_builtin_deployment(
        self, kube: Cluster, kube_namespace: str
    ) -> None:
        row = recording.row('replicas: "two"')
        body = deployment("bad")
        body["spec"]["replicas"] = "two"
        expected = row.message.replace(
            f"{GROUP}/v1alpha1, Kind=ModelDeployment", "apps/v1, Kind=Deployment"
        )
        assert_recorded(apply(kube, deployment_path(kube_namespace, "bad"), body), row, expected)

    def test_an_undeclared_field_even_with_field_validation_ignore(
        self, kube: Cluster, kube_namespace: str, model_crd: None
    ) -> None:
        row = recording.row("replcas")
        for validation in ("Ignore", "Strict"):
            answer = apply(
                kube,
                model_path(kube_namespace, "bad"),
                model("bad", {"model": "m", "replcas": 2}),
                fieldValidation=validation,
            )
            assert_recorded(answer, row)

    def test_an_object_whose_crd_is_older_than_the_fields_sent(
        self, kube: Cluster, kube_namespace: str
    ) -> None:
        row = recording.row("older than the fields sent")
        [crd] = read_documents(referee("lws/leaderworkerset.x-k8s.io_leaderworkersets.yaml"))
        if kube.real and kube.get(
            "apiextensions.k8s.io/v1", "CustomResourceDefinition", crd["metadata"]["name"]
        ):
            pytest.skip(
                "the cluster has its own LeaderWorkerSet CRD, which this test would replace"
            )
        old = copy.deepcopy(crd)
        for version in old["spec"]["versions"]:
            template = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"][
                "leaderWorkerTemplate"
            ]
            del template["properties"]["restartPolicy"]
        kube.install_crd_documents([old])
        try:
            body = {
                "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                "metadata": {"name": "multinode", "namespace": kube_namespace},
                "spec": {"replicas": 1, "leaderWorkerTemplate": {
                    "size": 2, "restartPolicy": "RecreateGroupOnPodRestart",
                    "workerTemplate": {"spec": {"containers": [{"name": "w", "image": "registry.invalid/w:1"}]}}}},
            }  # fmt: skip
            path = f"/apis/leaderworkerset.x-k8s.io/v1/namespaces/{kube_namespace}/leaderworkersets/multinode"
            expected = row.message.replace("(llm/multinode;", f"({kube_namespace}/multinode;")
            assert_recorded(apply(kube, path, body), row, expected)
        finally:
            kube.delete(
                "apiextensions.k8s.io/v1", "CustomResourceDefinition", crd["metadata"]["name"]
            )
            kube.wait_for(
                "the old LWS CRD to go",
                lambda: (
                    kube.get(
                        "apiextensions.k8s.io/v1",
                        "CustomResourceDefinition",
                        crd["metadata"]["name"],
                    )
                    is None
                ),
            )


class TestInvalid:
    """422 Invalid: value checks, with one cause per field."""

    def test_a_minimum_and_a_required_field(
        self, kube: Cluster, kube_namespace: str, model_crd: None
    ) -> None:
        row = recording.row("replicas: -1")
        answer = apply(kube, model_path(kube_namespace, "neg"), model("neg", {"replicas": -1}))
        assert_recorded(answer, row)

    def test_a_value_check_with_cel_rules_not_checked(
        self, kube: Cluster, kube_namespace: str
    ) -> None:
        row = recording.row("CEL rule failing")
        kube.install_platform_crds("gateway-api")
        route = {
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "split"},
            "spec": {"parentRefs": [{"name": "gw", "namespace": "n" * 70}],
                     "rules": [{"backendRefs": [{"name": "svc", "port": 8000}]}]},
        }  # fmt: skip
        path = f"/apis/gateway.networking.k8s.io/v1/namespaces/{kube_namespace}/httproutes/split"
        assert_recorded(apply(kube, path, route), row)

    def test_no_field_manager(self, kube: Cluster, kube_namespace: str) -> None:
        row = recording.row("no `fieldManager`")
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "c"},
            "data": {"a": "1"},
        }
        answer = apply(
            kube, f"/api/v1/namespaces/{kube_namespace}/configmaps/c", body, manager=None
        )
        code, status = answer
        assert code == row.code and status["reason"] == "Invalid"
        assert matches(row.message, status["message"]), status["message"]


class TestConflict:
    def test_a_field_owned_by_another_manager(self, kube: Cluster, kube_namespace: str) -> None:
        row = recording.row("owned by another manager")
        path = f"/api/v1/namespaces/{kube_namespace}/configmaps/owned"
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "owned"},
            "data": {"replicas": "1"},
        }
        assert apply(kube, path, body, manager="manager-a")[0] == 201
        body["data"]["replicas"] = "2"
        assert_recorded(apply(kube, path, body), row)

    def test_inside_a_list_keyed_by_name(self, kube: Cluster, kube_namespace: str) -> None:
        row = recording.row("owned by another manager")
        keyed = next(q for q in recording.quoted(row.body) if "[name=" in q)
        path = deployment_path(kube_namespace, "keyed")
        assert apply(kube, path, deployment("keyed"), manager="manager-a")[0] == 201
        code, body = apply(
            kube, path, deployment("keyed", container={"image": "registry.invalid/engine:2"})
        )
        assert code == 409 and body["reason"] == "Conflict"
        assert [c["field"] for c in body["details"]["causes"]] == [keyed]
        assert (
            body["message"] == f'Apply failed with 1 conflict: conflict with "manager-a": {keyed}'
        )


def test_anonymous_is_forbidden(kube: Cluster, kube_namespace: str) -> None:
    row = recording.row("anonymous")
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    code, status = kube.raw(
        "PATCH",
        f"/api/v1/namespaces/{kube_namespace}/configmaps/c",
        body,
        content_type=APPLY,
        query={"fieldManager": "specdeploy"},
        anonymous=True,
    )
    assert code == row.code and status["reason"] == "Forbidden", status
    assert 'User "system:anonymous" cannot patch resource "configmaps"' in status["message"]


class TestStored:
    """ "What the server does with what it stores"."""

    def test_empty_lists_are_dropped_on_builtin_kinds(
        self, kube: Cluster, kube_namespace: str
    ) -> None:
        assert "`initContainers: []` and `env: []`" in recording.section("What the server does")
        body = deployment("empty", pod={"initContainers": []}, container={"env": []})
        code, stored = apply(kube, deployment_path(kube_namespace, "empty"), body)
        assert code == 201
        pod = stored["spec"]["template"]["spec"]
        assert "initContainers" not in pod and "env" not in pod["containers"][0]

    def test_empty_lists_are_kept_on_custom_kinds(self, kube: Cluster, kube_namespace: str) -> None:
        assert "CRD-backed kinds (LWS, KServe, Kaito) keep" in recording.section(
            "What the server does"
        )
        kube.install_platform_crds("lws")
        body = {
            "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": "keeps"},
            "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 2, "workerTemplate": {"spec": {
                "initContainers": [], "containers": [{"name": "w", "image": "registry.invalid/w:1", "env": []}]}}}},
        }  # fmt: skip
        path = (
            f"/apis/leaderworkerset.x-k8s.io/v1/namespaces/{kube_namespace}/leaderworkersets/keeps"
        )
        code, stored = apply(kube, path, body)
        assert code == 201, stored
        pod = stored["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
        assert pod["initContainers"] == [] and pod["containers"][0]["env"] == []

    def test_managed_fields_after_an_apply_and_a_forced_apply(
        self, kube: Cluster, kube_namespace: str
    ) -> None:
        path = deployment_path(kube_namespace, "owned")
        assert apply(kube, path, deployment("owned"))[0] == 201

        def controller_entry() -> Any:
            current = kube.get("apps/v1", "Deployment", "owned", kube_namespace) or {}
            entries = current["metadata"].get("managedFields") or []
            return [e for e in entries if e["manager"] == "kube-controller-manager"] and entries

        entries = kube.wait_for(
            "the controller-manager's status update", controller_entry, timeout=30
        )
        ours = next(e for e in entries if e["manager"] == "specdeploy")
        theirs = next(e for e in entries if e["manager"] == "kube-controller-manager")
        assert (ours["operation"], theirs["operation"], theirs.get("subresource")) == (
            "Apply",
            "Update",
            "status",
        )
        for entry in (ours, theirs):
            assert {"time", "operation", "apiVersion"} <= set(entry) and entry[
                "fieldsType"
            ] == "FieldsV1"
        forced = deployment("owned", container={"image": "registry.invalid/engine:2"})
        code, stored = apply(kube, path, forced, manager="other-tool", force="true")
        assert code == 200
        managers = {e["manager"] for e in stored["metadata"]["managedFields"]}
        assert {"specdeploy", "other-tool"} <= managers

    def test_a_no_op_apply_changes_neither_resource_version_nor_generation(
        self, kube: Cluster, kube_namespace: str
    ) -> None:
        path = deployment_path(kube_namespace, "same")
        _, first = apply(kube, path, deployment("same"))
        _, again = apply(kube, path, deployment("same"))
        assert again["metadata"]["generation"] == first["metadata"]["generation"] == 1
        # the Deployment controller writes status on its own clock, which moves resourceVersion
        # between our GET and our apply (a loaded CI machine saw 1172 -> 1178); an apply that
        # itself wrote would move it on every try, so one quiet try of three is the evidence
        kube.settle()
        versions = []
        for _ in range(3):
            current = kube.get("apps/v1", "Deployment", "same", kube_namespace) or {}
            _, third = apply(kube, path, deployment("same"))
            versions.append(
                (current["metadata"]["resourceVersion"], third["metadata"]["resourceVersion"])
            )
            if versions[-1][0] == versions[-1][1]:
                break
            time.sleep(0.5)
        assert versions[-1][0] == versions[-1][1], versions

    def test_dependents_are_deleted_by_the_garbage_collector_later(
        self, kube: Cluster, kube_namespace: str
    ) -> None:
        assert "not inside the DELETE call" in recording.section("What the server does")
        apply(kube, deployment_path(kube_namespace, "gc"), deployment("gc"))
        owned = kube.wait_for(
            "the Deployment's ReplicaSet",
            lambda: kube.list("apps/v1", "ReplicaSet", kube_namespace),
        )
        kube.delete("apps/v1", "Deployment", "gc", kube_namespace)
        if kube.imitation is not None:  # a real collector may be quicker than this read
            assert kube.list("apps/v1", "ReplicaSet", kube_namespace) == owned[:1] or kube.list(
                "apps/v1", "ReplicaSet", kube_namespace
            )
        started = time.monotonic()
        kube.wait_for(
            "the ReplicaSet to be collected",
            lambda: not kube.list("apps/v1", "ReplicaSet", kube_namespace),
            timeout=30,
        )
        if kube.imitation is not None:
            assert time.monotonic() - started >= 0.2  # asynchronously, after the DELETE answered

    def test_a_finalizer_keeps_the_object_with_a_deletion_timestamp(
        self, kube: Cluster, kube_namespace: str
    ) -> None:
        assert "until its finalizer is removed" in recording.section("What the server does")
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "held", "finalizers": ["specdeploy.io/test"]},
        }
        path = f"/api/v1/namespaces/{kube_namespace}/configmaps/held"
        apply(kube, path, body)
        kube.delete("v1", "ConfigMap", "held", kube_namespace)
        held = kube.get("v1", "ConfigMap", "held", kube_namespace)
        assert held is not None and held["metadata"]["deletionTimestamp"]
        body["metadata"]["finalizers"] = []
        apply(kube, path, body)
        kube.wait_for(
            "the ConfigMap to go",
            lambda: kube.get("v1", "ConfigMap", "held", kube_namespace) is None,
        )


class TestAuthorization:
    """ "Authorization (RBAC)"."""

    def test_an_apply_that_creates_needs_create_as_well_as_patch(
        self, kube: Cluster, kube_namespace: str
    ) -> None:
        recorded = next(
            q for q in recording.quoted(recording.section("Authorization")) if "forbidden" in q
        )
        rules = [{"apiGroups": [""], "resources": ["services"], "verbs": ["get", "patch"]}]
        account = kube.service_account(kube_namespace, "patcher", rules)
        service = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "qwen3-4b-draft-front"},
            "spec": {"ports": [{"port": 80}]},
        }
        path = f"/api/v1/namespaces/{kube_namespace}/services/qwen3-4b-draft-front"
        code, status = kube.raw(
            "PATCH",
            path,
            service,
            content_type=APPLY,
            query={"fieldManager": "specdeploy"},
            kubeconfig=account,
        )
        assert code == 403 and status["reason"] == "Forbidden"
        assert matches(recorded + "…", status["message"]), status["message"]
        assert apply(kube, path, service, manager="admin")[0] == 201  # it exists now
        service["metadata"]["labels"] = {"team": "llm"}
        code, _ = kube.raw(
            "PATCH",
            path,
            service,
            content_type=APPLY,
            query={"fieldManager": "specdeploy"},
            kubeconfig=account,
        )
        assert code == 200  # over an existing object, patch alone is enough

    def test_label_selected_reads_need_list(self, kube: Cluster, kube_namespace: str) -> None:
        assert "`list` is needed for label-selected deletes and for `status`" in recording.section(
            "Authorization"
        )
        rules = [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "delete"]}]
        account = kube.service_account(kube_namespace, "deleter", rules)
        code, status = kube.raw(
            "GET",
            f"/apis/apps/v1/namespaces/{kube_namespace}/deployments",
            query={"labelSelector": "specdeploy.io/profile=x"},
            kubeconfig=account,
        )
        assert code == 403 and 'cannot list resource "deployments"' in status["message"]


class TestScheduling:
    """ "Scheduling"."""

    def test_too_many_gpus_stay_pending_with_the_schedulers_event(self, imitation: Cluster) -> None:
        recorded = recording.quoted(recording.section("Scheduling"))
        message = next(q for q in recorded if q.startswith("0/3 nodes"))
        api = imitation.need_imitation("the recording's three nodes")
        for node in imitation.list("v1", "Node"):
            api.system_remove(("", "nodes", "", node["metadata"]["name"]))
        api.system_create(("", "nodes", "", "control-plane"), node_body("control-plane"))
        for name in ("gpu-a", "gpu-b"):
            api.system_create(
                ("", "nodes", "", name),
                node_body(name, gpus=1, labels={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}),
            )
        namespace = imitation.namespace()
        body = deployment(
            "big",
            container={"resources": {"limits": {"nvidia.com/gpu": 2}}},
            pod={"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
        )
        imitation.apply(body, namespace=namespace)
        imitation.settle()
        [pod] = imitation.list("v1", "Pod", namespace)
        assert pod["status"]["phase"] == "Pending"
        [event] = [e for e in imitation.events(namespace) if e["reason"] == "FailedScheduling"]
        assert matches(message, event["message"]), event["message"]

    def test_on_any_cluster_a_pod_asking_for_more_gpus_than_there_are(
        self, kube: Cluster, kube_namespace: str
    ) -> None:
        body = deployment("huge", container={"resources": {"limits": {"nvidia.com/gpu": 4096}}})
        kube.apply(body, namespace=kube_namespace)

        def failed() -> Any:
            return [e for e in kube.events(kube_namespace) if e.get("reason") == "FailedScheduling"]

        [event, *_] = kube.wait_for("a FailedScheduling event", failed, timeout=60)
        assert (
            "Insufficient nvidia.com/gpu" in event["message"] or "didn't match" in event["message"]
        )
        [pod] = kube.list("v1", "Pod", kube_namespace)
        assert pod["status"]["phase"] == "Pending"

    def test_a_leader_worker_set_without_its_controller_gets_no_pods_and_no_event(
        self, kube: Cluster, kube_namespace: str
    ) -> None:
        assert "never gets Pods (no Event says why)" in recording.section("Scheduling")
        kube.install_platform_crds("lws")
        if kube.real and kube.list("apps/v1", "Deployment", "lws-system"):
            pytest.skip("the cluster runs an LWS controller")
        body = {
            "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": "alone"},
            "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 2, "workerTemplate": {"spec": {
                "containers": [{"name": "w", "image": "registry.invalid/w:1"}]}}}},
        }  # fmt: skip
        kube.apply(body, namespace=kube_namespace)
        kube.settle()
        time.sleep(1.0)
        assert kube.list("v1", "Pod", kube_namespace) == []
        assert kube.events(kube_namespace) == []
        assert not (
            kube.get("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "alone", kube_namespace)
            or {}
        ).get("status")
