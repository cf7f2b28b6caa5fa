"""What the engine container of a kserve-runtime pod finally is: KServe's own merge of our
predictor container into the `kserve-vllmserver` runtime's, reproduced.

KServe v0.20.0 (commit 1fb781055dd1567164358233e1125142ca6ef1fe) builds the pod's container with
`MergeRuntimeContainers` (pkg/controller/v1beta1/inferenceservice/utils/utils.go): a strategic
merge patch of the predictor container onto the runtime's (maps merge per key, lists with a
patch merge key merge by it, anything else is replaced), then args = runtime args + ours. The
runtime's `{{.Name}}` is replaced with the InferenceService's name (`ReplacePlaceholders`). The
runtime is read from ../shared/referees/platforms/kserve/config/kserve-vllmserver.yaml
(config/runtimes/kserve-vllmserver.yaml at that tag); the test skips, naming it, when absent.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from orchestrator.emitters.kserve_runtime import KserveRuntimeEmitter
from tests.support import REPO_ROOT
from tests.unit.emitters.conftest import ParseVllm
from tests.unit.emitters.referees import SCHEMA_ROOTS
from tests.unit.manifests.conftest import valid_plan

RUNTIME_FILE = "kserve/config/kserve-vllmserver.yaml"
#: core/v1 Container's lists with a patch merge key (k8s.io/api/core/v1/types.go
#: `patchMergeKey` tags): merged item by item on that key.
MERGE_KEYS = {"env": "name", "volumeMounts": "mountPath", "ports": "containerPort"}


def runtime_container() -> dict[str, Any]:
    for root in SCHEMA_ROOTS:
        path = root / RUNTIME_FILE
        if path.is_file():
            runtime = yaml.safe_load(path.read_text(encoding="utf-8"))
            (main,) = [c for c in runtime["spec"]["containers"] if c["name"] == "kserve-container"]
            return dict(main)
    pytest.skip(f"{RUNTIME_FILE} is in none of {[str(r) for r in SCHEMA_ROOTS]}")


def strategic_merge(base: Any, patch: Any, key: str = "") -> Any:
    """k8s strategic merge patch for the Container fields involved."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for name, value in patch.items():
            out[name] = strategic_merge(base[name], value, name) if name in base else value
        return out
    if isinstance(base, list) and isinstance(patch, list) and key in MERGE_KEYS:
        by = MERGE_KEYS[key]
        out_list = [dict(item) for item in base]
        for item in patch:
            index = next((i for i, b in enumerate(out_list) if b.get(by) == item.get(by)), None)
            if index is None:
                out_list.append(item)
            else:
                out_list[index] = strategic_merge(out_list[index], item)
        return out_list
    return patch


def merged_container(service: dict[str, Any]) -> dict[str, Any]:
    """MergeRuntimeContainers(runtime, predictor.model), then ReplacePlaceholders."""
    runtime = runtime_container()
    ours = {
        k: v
        for k, v in service["spec"]["predictor"]["model"].items()
        if k not in ("modelFormat", "runtime", "storageUri", "runtimeVersion", "protocolVersion")
    }
    merged = strategic_merge(runtime, ours)
    merged["args"] = [*runtime.get("args", []), *ours.get("args", [])]
    text = json.dumps(merged).replace("{{.Name}}", service["metadata"]["name"])
    return dict(json.loads(text))


def services(profile: str) -> list[dict[str, Any]]:
    plan = valid_plan(REPO_ROOT / "profiles" / profile)
    return [m.body for m in KserveRuntimeEmitter().emit(plan)]


@pytest.mark.parametrize(
    "profile", ["vllm-qwen3-4b-draft.yaml", "vllm-qwen3-8b-ngram.yaml", "vllm-mimo-7b-mtp.yaml"]
)
def test_the_pod_gets_our_resources_not_the_runtimes(profile: str) -> None:
    runtime = runtime_container()["resources"]
    assert runtime == {
        "requests": {"cpu": "1", "memory": "2Gi"},
        "limits": {"cpu": "1", "memory": "2Gi"},
    }, "the runtime's resources changed: re-check the merge"
    for service in services(profile):
        ours = service["spec"]["predictor"]["model"]["resources"]
        final = merged_container(service)["resources"]
        assert final == ours
        for side in ("requests", "limits"):
            assert set(runtime[side]) <= set(final[side]), f"{side}: a runtime key survives"
            assert final[side]["memory"] != "2Gi"
            assert int(final[side]["memory"].removesuffix("Gi")) >= 14
            assert int(final[side]["cpu"]) >= 3
        assert final["limits"]["nvidia.com/gpu"] == "1"


def test_the_draft_twin_and_its_baseline_both_fit_the_8b_pattern() -> None:
    """An 8B target at bf16 is ~16 GiB of weights: without the weights' size known the limit
    still leaves the fallback's page cache above what stays resident."""
    for service in services("vllm-qwen3-8b-ngram.yaml"):
        final = merged_container(service)["resources"]
        request = int(final["requests"]["memory"].removesuffix("Gi"))
        limit = int(final["limits"]["memory"].removesuffix("Gi"))
        assert limit > request


def test_the_final_argv_parses_with_vllm(parse_vllm: ParseVllm) -> None:
    service = next(
        s for s in services("vllm-qwen3-4b-draft.yaml") if "baseline" not in s["metadata"]["name"]
    )
    final = merged_container(service)
    assert final["command"] == ["python", "-m", "vllm.entrypoints.openai.api_server"]
    # The kubelet turns `$$` into `$` in args.
    argv = [token.replace("$$", "$") for token in final["args"]]
    (parsed,) = parse_vllm([argv])
    assert "error" not in parsed, parsed
    assert parsed["speculative_config"] == {
        "method": "draft_model",
        "model": "Qwen/Qwen3-0.6B",
        "num_speculative_tokens": 5,
    }
    # Ours come after the runtime's, so ours win; the model is the storage initializer's copy.
    assert parsed["served_model_name"] == [
        service["spec"]["predictor"]["model"]["args"][
            service["spec"]["predictor"]["model"]["args"].index("--served-model-name") + 1
        ]
    ]
    assert argv[:3] == [
        "--port=8080",
        f"--served-model-name={service['metadata']['name']}",
        "--model=/mnt/models",
    ]


@pytest.mark.parametrize("profile", ["vllm-qwen3-4b-draft.yaml", "vllm-qwen3-8b-ngram.yaml"])
def test_the_pod_runs_the_release_the_plan_checked(profile: str) -> None:
    """Without an image of ours the runtime's (vllm/vllm-openai:latest once KServe's
    kustomization replaces `vllmserver:replace`) would run, not engine.version."""
    plan = valid_plan(REPO_ROOT / "profiles" / profile)
    for service in services(profile):
        final = merged_container(service)
        annotations = service["metadata"]["annotations"]
        assert final["image"] == annotations["specdeploy.io/image"]
        assert final["image"] == f"vllm/vllm-openai:v{plan.profile.engine.version}"
        assert annotations["specdeploy.io/engine-version"] == plan.profile.engine.version
