"""Rendered Kubernetes objects: schema-valid, shaped as an SRE would write them, and safe."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.deploy.dry_run_files import render_files
from orchestrator.emitters.base import APPLY_ORDER_FILE, Manifest, ManifestError
from orchestrator.emitters.kubernetes import manifest_files, manifests_for, render_manifests
from orchestrator.manifests.rendering import templates_dir
from tests.support import EXAMPLE_PROFILES
from tests.unit.manifests.conftest import MakePlan, valid_plan, validate_object


def by_kind(manifests: list[Manifest], kind: str) -> list[dict[str, Any]]:
    return [m.body for m in manifests if m.kind == kind]


def container(workload: dict[str, Any]) -> dict[str, Any]:
    return workload["spec"]["template"]["spec"]["containers"][0]


class TestExampleProfiles:
    @pytest.mark.parametrize("profile", EXAMPLE_PROFILES, ids=lambda p: p.stem)
    def test_every_object_passes_strict_schema_validation(self, profile: Path) -> None:
        manifests = manifests_for(valid_plan(profile))
        assert manifests
        for manifest in manifests:
            validate_object(manifest.body)

    @pytest.mark.parametrize("profile", EXAMPLE_PROFILES, ids=lambda p: p.stem)
    def test_files_are_named_by_kind_and_listed_in_apply_order(self, profile: Path) -> None:
        files = manifest_files(valid_plan(profile))
        order = files.pop(APPLY_ORDER_FILE).split()
        assert sorted(order) == sorted(f.removeprefix("k8s/") for f in files)
        kinds = [yaml.safe_load(files[f"k8s/{name}"])["kind"] for name in order]
        assert kinds.index("Service") < kinds.index("Deployment")
        for name, text in files.items():
            body = yaml.safe_load(text)
            assert name == f"k8s/{body['kind'].lower()}-{body['metadata']['name']}.yaml"


class TestDeployment:
    def test_gpu_limits_selector_tolerations_shm_and_probes(self, make_plan: MakePlan) -> None:
        plan = make_plan(hardware={"gpu": "L40S", "tensor_parallel_size": 2, "gpus_per_node": 8})
        (deployment,) = by_kind(manifests_for(plan), "Deployment")
        pod = deployment["spec"]["template"]["spec"]
        engine = container(deployment)
        assert engine["resources"] == {"limits": {"nvidia.com/gpu": "2"}}
        assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-L40S"}
        assert pod["tolerations"] == [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
        ]
        shm = next(v for v in pod["volumes"] if v["name"] == "dshm")
        assert shm["emptyDir"]["medium"] == "Memory"
        assert {"name": "dshm", "mountPath": "/dev/shm"} in engine["volumeMounts"]
        launch = plan.launch_for(container=True)
        assert launch is not None
        assert engine["startupProbe"]["httpGet"] == {"path": launch.health_path, "port": "http"}
        assert engine["readinessProbe"]["httpGet"]["path"] == launch.ready_path
        assert engine["ports"] == [
            {"name": "http", "containerPort": launch.port, "protocol": "TCP"}
        ]
        assert engine["command"] == list(launch.argv)

    def test_startup_budget_covers_at_least_ten_minutes(self, make_plan: MakePlan) -> None:
        (deployment,) = by_kind(manifests_for(make_plan()), "Deployment")
        probe = container(deployment)["startupProbe"]
        assert probe["periodSeconds"] * probe["failureThreshold"] >= 600

    def test_cpu_profile_asks_for_no_gpu(self, make_plan: MakePlan) -> None:
        plan = make_plan(hardware={"device": "cpu"})
        (deployment,) = by_kind(manifests_for(plan), "Deployment")
        pod = deployment["spec"]["template"]["spec"]
        assert container(deployment)["resources"] == {}
        assert pod["nodeSelector"] == {} and pod["tolerations"] == []
        assert "gpu" not in yaml.safe_dump(pod["nodeSelector"])

    def test_labels_and_audit_annotations(self, make_plan: MakePlan) -> None:
        plan = make_plan(
            target={"model": "Qwen/Qwen3-8B", "revision": "abc123"},
            proposer={"method": "draft_model", "model": "Qwen/Qwen3-0.6B", "revision": "def456"},
        )
        (deployment,) = by_kind(manifests_for(plan), "Deployment")
        labels, notes = deployment["metadata"]["labels"], deployment["metadata"]["annotations"]
        assert labels["app.kubernetes.io/managed-by"] == "specdeploy"
        assert labels["app.kubernetes.io/instance"] == "test"
        assert labels["specdeploy.io/variant"] == "speculative"
        assert notes["specdeploy.io/target-model"] == "Qwen/Qwen3-8B"
        assert notes["specdeploy.io/target-revision"] == "abc123"
        assert notes["specdeploy.io/proposer-method"] == "draft_model"
        assert notes["specdeploy.io/proposer-model"] == "Qwen/Qwen3-0.6B"
        assert notes["specdeploy.io/proposer-revision"] == "def456"
        assert notes["specdeploy.io/engine"] == "vllm"
        assert notes["specdeploy.io/engine-version"] == "0.32.0"
        assert notes["specdeploy.io/image"] == container(deployment)["image"]
        assert re.fullmatch(r"sha256:[0-9a-f]{64}", notes["specdeploy.io/profile-hash"])

    def test_profile_hash_changes_with_settings(self, make_plan: MakePlan) -> None:
        def digest(plan: Any) -> str:
            (d,) = by_kind(manifests_for(plan), "Deployment")
            return str(d["metadata"]["annotations"]["specdeploy.io/profile-hash"])

        assert digest(make_plan()) == digest(make_plan())
        assert digest(make_plan()) != digest(make_plan(serving={"max_model_len": 4096}))

    def test_hf_token_only_as_secret_reference(self, make_plan: MakePlan) -> None:
        plan = make_plan(deploy={"hf_token_secret": "hf-token"})
        (deployment,) = by_kind(manifests_for(plan), "Deployment")
        (token,) = [e for e in container(deployment)["env"] if e["name"] == "HF_TOKEN"]
        assert token == {
            "name": "HF_TOKEN",
            "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "HF_TOKEN"}},
        }

    def test_no_secret_value_in_any_rendered_file(
        self, make_plan: MakePlan, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        secret = "hf_SeCrEtVaLuE0123456789"
        monkeypatch.setenv("HF_TOKEN", secret)
        monkeypatch.setenv("HUGGING_FACE_HUB_TOKEN", secret)
        plan = make_plan(deploy={"hf_token_secret": "hf-token", "baseline": True})
        for name, content in render_files(plan).items():
            assert secret not in content, name

    def test_local_model_directories_are_mounted_read_only(
        self, make_plan: MakePlan, tmp_path: Path
    ) -> None:
        (tmp_path / "target").mkdir()
        (tmp_path / "draft").mkdir()
        plan = make_plan(
            target={"model": "./target"},
            proposer={"method": "draft_model", "model": "./draft"},
        )
        (deployment,) = by_kind(manifests_for(plan), "Deployment")
        pod = deployment["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert volumes["target-model"]["hostPath"] == {
            "path": str((tmp_path / "target").resolve()),
            "type": "Directory",
        }
        mounts = {m["name"]: m for m in container(deployment)["volumeMounts"]}
        assert mounts["target-model"] == {
            "name": "target-model",
            "mountPath": "/models/target",
            "readOnly": True,
        }
        assert mounts["draft-model"]["mountPath"] == "/models/draft"
        assert "/models/target" in container(deployment)["command"]
        validate_object(deployment)

    def test_model_cache_pvc_is_applied_first_and_mounted(self, make_plan: MakePlan) -> None:
        cache = {"size": "50Gi", "storage_class": "fast"}
        plan = make_plan(deploy={"baseline": True, "model_cache": cache})
        manifests = manifests_for(plan)
        assert manifests[0].kind == "PersistentVolumeClaim"
        pvc = manifests[0].body
        assert pvc["spec"]["resources"]["requests"]["storage"] == "50Gi"
        assert pvc["spec"]["storageClassName"] == "fast"
        for deployment in by_kind(manifests, "Deployment"):
            volumes = deployment["spec"]["template"]["spec"]["volumes"]
            hf = next(v for v in volumes if v["name"] == "hf-cache")
            assert hf == {
                "name": "hf-cache",
                "persistentVolumeClaim": {"claimName": "test-hf-cache"},
            }
        for manifest in manifests:
            validate_object(manifest.body)

    def test_engine_config_files_become_a_mounted_config_map(self, make_plan: MakePlan) -> None:
        plan = make_plan(
            engine={"name": "trtllm", "version": "1.2.1"},
            proposer={"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"},
        )
        manifests = manifests_for(plan)
        (config_map,) = by_kind(manifests, "ConfigMap")
        launch = plan.launch_for(container=True)
        assert launch is not None
        assert config_map["data"] == dict(launch.config_files)
        (deployment,) = by_kind(manifests, "Deployment")
        mounts = {m["name"]: m for m in container(deployment)["volumeMounts"]}
        assert mounts["engine-config"]["mountPath"] == launch.config_dir

    def test_longest_name_the_schema_allows_names_every_object(self, make_plan: MakePlan) -> None:
        # The schema caps metadata.name at 47 characters: the longest derived names (the baseline
        # twin's leader Service and ConfigMap of a multi-node group) then have exactly 63.
        plan = make_plan(
            metadata={"name": "a" * 47},
            deploy={"baseline": True},
            proposer={"method": "ngram"},
            hardware={"gpu": "H100-80GB", "tensor_parallel_size": 16},
        )
        manifests = manifests_for(plan)
        names = [m.body["metadata"]["name"] for m in manifests]
        assert max(map(len, names)) == 63 and f"{'a' * 47}-baseline-leader" in names
        for manifest in manifests:
            validate_object(manifest.body)


class TestBaselineTwin:
    @pytest.mark.parametrize(
        ("engine", "proposer"),
        [
            ({"name": "vllm", "version": "0.32.0"}, {"method": "ngram"}),
            (
                {"name": "sglang", "version": "0.5.23"},
                {"method": "draft_model", "model": "Qwen/Qwen3-0.6B"},
            ),
        ],
    )
    def test_twin_differs_only_in_speculative_flags(
        self, make_plan: MakePlan, engine: dict[str, str], proposer: dict[str, str]
    ) -> None:
        from orchestrator.engines import ENGINES

        plan = make_plan(engine=engine, proposer=proposer, deploy={"baseline": True})
        manifests = manifests_for(plan)
        speculative, baseline = by_kind(manifests, "Deployment")
        assert baseline["metadata"]["name"] == "test-baseline"
        assert baseline["metadata"]["labels"]["specdeploy.io/variant"] == "baseline"
        assert baseline["metadata"]["annotations"]["specdeploy.io/proposer-method"] == "none"
        flags = ENGINES[engine["name"]].speculative_flags()
        spec_cmd, base_cmd = container(speculative)["command"], container(baseline)["command"]
        assert spec_cmd != base_cmd
        assert _without_flags(spec_cmd, flags) == base_cmd
        # Everything else in the pod is the same, apart from names, labels and the audit trail.
        spec_pod, base_pod = _neutral(speculative), _neutral(baseline)
        assert spec_pod == base_pod

    def test_twin_has_its_own_service(self, make_plan: MakePlan) -> None:
        manifests = manifests_for(make_plan(deploy={"baseline": True}))
        services = {s["metadata"]["name"]: s for s in by_kind(manifests, "Service")}
        assert services["test-baseline"]["spec"]["selector"]["app.kubernetes.io/instance"] == (
            "test-baseline"
        )

    def test_baseline_profile_has_no_twin(self, make_plan: MakePlan) -> None:
        plan = make_plan(proposer={"method": "none"}, deploy={"baseline": True})
        (deployment,) = by_kind(manifests_for(plan), "Deployment")
        assert deployment["metadata"]["name"] == "test"
        assert deployment["metadata"]["labels"]["specdeploy.io/variant"] == "baseline"


def _without_flags(argv: list[str], flags: frozenset[str]) -> list[str]:
    out: list[str] = []
    skip_value = False
    for token in argv:
        if skip_value:
            skip_value = False
            continue
        if token in flags:
            # A speculative flag followed by a value (not another flag) drops both.
            skip_value = True
            continue
        out.append(token)
    return out


def _neutral(workload: dict[str, Any]) -> dict[str, Any]:
    pod = dict(workload["spec"]["template"]["spec"])
    engine = dict(pod["containers"][0])
    engine.pop("command")
    pod["containers"] = [engine]
    return pod


class TestMultiNode:
    @pytest.mark.parametrize("engine", [("vllm", "0.32.0"), ("sglang", "0.5.23")])
    def test_leader_worker_set_when_parallelism_exceeds_a_node(
        self, make_plan: MakePlan, engine: tuple[str, str]
    ) -> None:
        plan = make_plan(
            engine={"name": engine[0], "version": engine[1]},
            proposer={"method": "ngram"},
            hardware={"gpu": "H100-80GB", "tensor_parallel_size": 8, "pipeline_parallel_size": 2},
            deploy={"baseline": True},
        )
        manifests = manifests_for(plan)
        assert not by_kind(manifests, "Deployment")
        lws, _twin = by_kind(manifests, "LeaderWorkerSet")
        group = lws["spec"]["leaderWorkerTemplate"]
        assert group["size"] == 2
        leader = group["leaderTemplate"]["spec"]["containers"][0]
        worker = group["workerTemplate"]["spec"]["containers"][0]
        assert leader["resources"] == worker["resources"] == {"limits": {"nvidia.com/gpu": "8"}}
        assert "readinessProbe" in leader and "readinessProbe" not in worker
        joined = " ".join(leader["command"] + worker["command"])
        if engine[0] == "vllm":
            assert "--ray_cluster_size=2" in joined
            assert "--ray_address=$(LWS_LEADER_ADDRESS)" in joined
        else:
            assert leader["command"][-6:] == [
                "--nnodes",
                "2",
                "--node-rank",
                "$(LWS_WORKER_INDEX)",
                "--dist-init-addr",
                "$(LWS_LEADER_ADDRESS):20000",
            ]
        service = next(
            s for s in by_kind(manifests, "Service") if s["metadata"]["name"] == "test-leader"
        )
        assert service["spec"]["selector"]["leaderworkerset.sigs.k8s.io/worker-index"] == "0"
        for manifest in manifests:
            validate_object(manifest.body)


#: Strings crafted to break out of a YAML scalar, start a new document or add a key.
INJECTIONS = [
    'evil"\nkind: Secret\n',
    "x: y\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: pwned}",
    "}, hostNetwork: true, x: {",
    "', privileged: true, '",
    "a\n  hostNetwork: true",
    "$(HF_TOKEN) {{ ctx.name }} {% raw %} <script>&",
]


class TestYamlInjection:
    @pytest.mark.parametrize("payload", INJECTIONS)
    def test_crafted_strings_cannot_add_or_change_fields(
        self, make_plan: MakePlan, payload: str
    ) -> None:
        def render(text: str) -> list[Manifest]:
            return manifests_for(
                make_plan(
                    # Revisions are git refs, refused at load when they hold such text
                    # (tests/hostile/test_hostile_fields.py); model references are free text.
                    target={"model": f"org/{text}", "revision": "main"},
                    proposer={"method": "draft_model", "model": f"d/{text}", "revision": "v1"},
                    serving={"extra_args": ["--disable-log-requests", text]},
                    deploy={"baseline": True},
                )
            )

        benign, crafted = render("benign"), render(payload)
        assert [(m.kind, m.name) for m in benign] == [(m.kind, m.name) for m in crafted]
        for clean, evil in zip(benign, crafted, strict=True):
            assert _paths(clean.body) == _paths(evil.body)
            if evil.kind == "Deployment":
                assert f"org/{payload}" in _strings(evil.body)
        (deployment, _) = by_kind(crafted, "Deployment")
        notes = deployment["metadata"]["annotations"]
        assert notes["specdeploy.io/target-model"] == f"org/{payload}"
        command = container(deployment)["command"]
        assert command[-1] == payload.replace("$(", "$$(")  # the kubelet must not expand it

    def test_template_variables_are_not_evaluated_twice(self, make_plan: MakePlan) -> None:
        plan = make_plan(serving={"extra_args": ["{{ ctx.metadata }}"]})
        (deployment,) = by_kind(manifests_for(plan), "Deployment")
        assert container(deployment)["command"][-1] == "{{ ctx.metadata }}"


def _paths(node: Any, prefix: str = "") -> set[str]:
    if isinstance(node, dict):
        out = {prefix}
        for key, value in node.items():
            out |= _paths(value, f"{prefix}/{key}")
        return out
    if isinstance(node, list):
        out = {prefix}
        for index, value in enumerate(node):
            out |= _paths(value, f"{prefix}[{index}]")
        return out
    return {f"{prefix}:{type(node).__name__}"}


def _strings(node: Any) -> list[str]:
    if isinstance(node, dict):
        return [s for v in node.values() for s in _strings(v)]
    if isinstance(node, list):
        return [s for v in node for s in _strings(v)]
    return [node] if isinstance(node, str) else []


class TestTemplates:
    TEMPLATES = sorted((templates_dir() / "kubernetes").glob("*.yaml.j2"))

    @pytest.mark.parametrize("template", TEMPLATES, ids=lambda p: p.name)
    def test_templates_hold_values_only(self, template: Path) -> None:
        text = template.read_text()
        assert len(text.splitlines()) <= 60
        assert "{%" not in text, "no statements: decisions belong in manifests/context.py"
        for expression in re.findall(r"\{\{.*?\}\}", text):
            assert re.fullmatch(r"\{\{ (ctx|cache)(\.\w+)+ \| tojson \}\}", expression), expression
        assert len(re.findall(r"^kind: ", text, re.MULTILINE)) == 1

    def test_a_misspelt_value_is_an_error(self, make_plan: MakePlan) -> None:
        values = make_plan().manifests.values()
        del values["variants"][0]["pod"]["image"]
        broken = type(make_plan().manifests)
        with pytest.raises(Exception):  # noqa: B017 - pydantic refuses before Jinja sees it
            broken.model_validate(values)
        env_values = values["variants"][0]
        from orchestrator.manifests import rendering

        with pytest.raises(ManifestError, match=r"deployment\.yaml\.j2.*image"):
            rendering.render_template("deployment", ctx=env_values)

    def test_parse_names_the_template(self) -> None:
        with pytest.raises(ManifestError, match=r"service\.yaml\.j2.*metadata\.name"):
            Manifest.parse(
                {"apiVersion": "v1", "kind": "Service", "metadata": {}},
                source="templates/kubernetes/service.yaml.j2",
            )
        with pytest.raises(ManifestError, match="without kind"):
            Manifest.parse({"apiVersion": "v1"}, source="x")

    def test_render_manifests_is_deterministic(self, make_plan: MakePlan) -> None:
        first = render_manifests(make_plan(deploy={"baseline": True}).manifests)
        second = render_manifests(make_plan(deploy={"baseline": True}).manifests)
        assert [m.body for m in first] == [m.body for m in second]
