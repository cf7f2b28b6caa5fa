"""Planning computes everything once: validate, render and the other commands read one plan, and
what the launch and manifest stages refuse is a finding at validate time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from orchestrator.checkpoint.info import CheckpointInfo, Unresolved
from orchestrator.emitters.kubernetes import manifests_for
from orchestrator.plan.build import load_and_plan, plan_profile
from orchestrator.plan.types import DeploymentPlan, ModelLocation, RejectedPlan
from tests.support import REPO_ROOT, make_profile, write_profile

PROFILE = REPO_ROOT / "profiles" / "vllm-qwen3-4b-draft.yaml"
IGNORE_UNRESOLVED = frozenset({"checkpoint.unresolved"})


def rejected(path: Path, **kw: Any) -> RejectedPlan:
    plan = load_and_plan(path, offline=True, ignore=IGNORE_UNRESOLVED, **kw)
    assert isinstance(plan, RejectedPlan), plan
    return plan


class TestOneComputation:
    def test_a_valid_plan_carries_its_launches_and_manifest_set(self) -> None:
        plan = load_and_plan(PROFILE, offline=True)
        assert isinstance(plan, DeploymentPlan)
        assert plan.launch is plan.launches.local
        assert plan.launch_for(container=True) is plan.launches.container
        assert "--speculative-config" in plan.launches.local.argv
        assert "--speculative-config" not in plan.launches.baseline_local.argv
        variants = [v.variant for v in plan.manifests.variants]
        assert variants == ["speculative", "baseline"]
        # The emitter renders the plan's own manifest set: the launch the plan computed.
        deployment = next(m for m in manifests_for(plan) if m.kind == "Deployment")
        command = deployment.body["spec"]["template"]["spec"]["containers"][0]["command"]
        assert command == list(plan.launches.container.argv)

    def test_a_rejected_plan_has_no_launch(self, tmp_path: Path) -> None:
        plan = load_and_plan(
            write_profile(tmp_path, serving={"extra_args": ["--max-model-len", "9"]}), offline=True
        )
        assert isinstance(plan, RejectedPlan)
        assert not hasattr(plan, "launches")
        assert plan.exit_code() == 4 and plan.profile is not None

    def test_a_profile_that_does_not_load_is_rejected_with_its_field(self, tmp_path: Path) -> None:
        plan = load_and_plan(write_profile(tmp_path, serving={"max_model_lenn": 8}))
        assert isinstance(plan, RejectedPlan) and plan.profile is None
        (finding,) = plan.findings
        assert finding.rule == "profile.unknown-field" and finding.field == "serving.max_model_lenn"
        assert plan.exit_code() == 3


class TestStageFindings:
    """engine.multi-node is the manifest stage's own refusal, reported by validate."""

    def test_trtllm_beyond_one_node_is_refused_at_validate_time(self, tmp_path: Path) -> None:
        path = write_profile(
            tmp_path,
            engine={"name": "trtllm", "version": "1.2.1"},
            proposer={"method": "ngram"},
            hardware={"tensor_parallel_size": 16},
        )
        finding = next(f for f in rejected(path).errors if f.rule == "engine.multi-node")
        assert "16 GPUs" in finding.what and "needs 2 nodes" in finding.what
        assert "MPI" in finding.why and "sglang or vllm" in finding.fix
        assert finding.field == "hardware.tensor_parallel_size"

    def test_uneven_split_over_nodes_is_refused(self, tmp_path: Path) -> None:
        path = write_profile(tmp_path, hardware={"tensor_parallel_size": 9, "gpus_per_node": 8})
        finding = next(f for f in rejected(path).errors if f.rule == "engine.multi-node")
        assert "do not split evenly over 2 nodes" in finding.what
        assert "divisible by 2" in finding.fix

    @pytest.mark.parametrize("engine", ["vllm", "sglang"])
    def test_vllm_and_sglang_span_nodes(self, tmp_path: Path, engine: str) -> None:
        versions = {"vllm": "0.32.0", "sglang": "0.5.23"}
        path = write_profile(
            tmp_path,
            engine={"name": engine, "version": versions[engine]},
            proposer={"method": "ngram"},
            hardware={"tensor_parallel_size": 8, "pipeline_parallel_size": 2},
        )
        plan = load_and_plan(path, offline=True, ignore=IGNORE_UNRESOLVED)
        assert not any(f.rule == "engine.multi-node" for f in plan.findings)


class RecordingSource:
    """A checkpoint source that is not the file system: what an operator would plug in."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    def resolve(self, field: str, model: str, revision: str | None) -> CheckpointInfo | Unresolved:
        self.asked.append((field, model))
        return Unresolved(field=field, model=model, revision=revision, tried=("in-cluster: none",))

    def locate(self, model: str) -> ModelLocation:
        return ModelLocation(model, None)


def test_plan_profile_takes_any_checkpoint_source() -> None:
    source = RecordingSource()
    profile = make_profile()
    plan = plan_profile(profile, source, profile_path=Path("ns/test"), ignore=IGNORE_UNRESOLVED)
    assert source.asked == [
        ("target.model", "Qwen/Qwen3-8B"),
        ("proposer.model", "Qwen/Qwen3-0.6B"),
    ]
    assert isinstance(plan, DeploymentPlan)
    assert plan.memory is None  # nothing resolved: no budget, and the info finding says so
    assert any(f.rule == "memory.over-budget" and f.severity == "info" for f in plan.findings)
