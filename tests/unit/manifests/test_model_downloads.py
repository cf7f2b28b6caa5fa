"""EngineLaunch.downloads become init containers: a TensorRT-LLM release that cannot fetch a hub
EAGLE head itself (before 1.2.0) gets it downloaded into an emptyDir the engine then reads."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from orchestrator.emitters.kubernetes import manifests_for
from orchestrator.engines.base import ModelDownload
from orchestrator.engines.trtllm import DRAFT_DOWNLOAD_DIR
from orchestrator.manifests.context import DOWNLOAD_SCRIPT
from orchestrator.plan import build as planning
from orchestrator.plan.types import DeploymentPlan, Launches
from tests.unit.manifests.conftest import MakePlan, validate_object

HEAD = "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
TRTLLM_EAGLE3: dict[str, Any] = {
    "engine": {"name": "trtllm", "version": "1.1.0"},
    "target": {"model": "meta-llama/Llama-3.1-8B-Instruct"},
    "proposer": {"method": "eagle3", "model": HEAD, "num_speculative_tokens": 4},
}


def pod_spec(workload: dict[str, Any], template: str = "template") -> dict[str, Any]:
    if workload["kind"] == "LeaderWorkerSet":
        return dict(workload["spec"]["leaderWorkerTemplate"][template]["spec"])
    return dict(workload["spec"]["template"]["spec"])


def workloads(plan: DeploymentPlan) -> list[dict[str, Any]]:
    return [m.body for m in manifests_for(plan) if m.kind in ("Deployment", "LeaderWorkerSet")]


def test_a_hub_head_on_1_1_is_downloaded_before_the_engine_starts(make_plan: MakePlan) -> None:
    plan = make_plan(**TRTLLM_EAGLE3, deploy={"hf_token_secret": "hf-token", "baseline": True})
    speculative, baseline = workloads(plan)
    pod = pod_spec(speculative)
    (init,) = pod["initContainers"]
    assert init["image"] == pod["containers"][0]["image"]
    script = ["sh", "-c", DOWNLOAD_SCRIPT, "download"]
    assert init["command"] == [*script, HEAD, "", DRAFT_DOWNLOAD_DIR]
    token = {"secretKeyRef": {"name": "hf-token", "key": "HF_TOKEN"}}
    assert init["env"] == [{"name": "HF_TOKEN", "valueFrom": token}]
    (volume,) = [v for v in pod["volumes"] if v["name"] == init["name"]]
    assert volume == {"name": init["name"], "emptyDir": {}}
    mount = {"name": init["name"], "mountPath": DRAFT_DOWNLOAD_DIR}
    assert init["volumeMounts"] == [mount]
    assert mount in pod["containers"][0]["volumeMounts"]
    assert pod_spec(baseline)["initContainers"] == []  # the baseline loads no head
    validate_object(speculative)


def test_the_revision_is_passed_and_no_token_without_a_secret(make_plan: MakePlan) -> None:
    proposer = {**TRTLLM_EAGLE3["proposer"], "revision": "abc123"}
    plan = make_plan(**{**TRTLLM_EAGLE3, "proposer": proposer})
    (init,) = pod_spec(workloads(plan)[0])["initContainers"]
    assert init["command"][-3:] == [HEAD, "abc123", DRAFT_DOWNLOAD_DIR]
    assert init["env"] == []


def test_a_release_that_downloads_itself_gets_no_init_container(make_plan: MakePlan) -> None:
    plan = make_plan(**{**TRTLLM_EAGLE3, "engine": {"name": "trtllm", "version": "1.2.1"}})
    assert pod_spec(workloads(plan)[0])["initContainers"] == []


@pytest.fixture
def with_downloads(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Any engine's launch, with two downloads added (no engine asks for them multi-node yet)."""
    original = planning.build_launches
    downloads = (ModelDownload("a/b", None, "/models/a"), ModelDownload("c/d", "v1", "/m/c"))

    def build_launches(*args: Any, **kw: Any) -> Launches:
        planned = original(*args, **kw)
        launches = (
            planned.local,
            planned.container,
            planned.baseline_local,
            planned.baseline_container,
        )
        return Launches(*(dataclasses.replace(launch, downloads=downloads) for launch in launches))

    monkeypatch.setattr(planning, "build_launches", build_launches)
    yield


@pytest.mark.usefixtures("with_downloads")
def test_leader_and_workers_of_a_group_each_download(make_plan: MakePlan) -> None:
    plan = make_plan(hardware={"tensor_parallel_size": 16})
    (group,) = workloads(plan)
    assert group["kind"] == "LeaderWorkerSet"
    for template in ("leaderTemplate", "workerTemplate"):
        pod = pod_spec(group, template)
        assert [c["name"] for c in pod["initContainers"]] == ["download-0", "download-1"]
        mounts = pod["containers"][0]["volumeMounts"]
        assert {"name": "download-1", "mountPath": "/m/c"} in mounts
    validate_object(group)
