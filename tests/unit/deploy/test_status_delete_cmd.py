"""`status` exits 0 only when every workload is ready (8 when not), says when a workload's
controller seems absent, and `delete` works from a profile's metadata alone; through the CLI,
against the imitation of the kube-apiserver (tests/kube/README.md)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from orchestrator.cli import cli
from orchestrator.errors import EXIT_NOT_READY
from tests.kube import controllers
from tests.kube.cluster import Cluster
from tests.kube.fixtures import kubeconfig_env
from tests.support import REPO_ROOT, write_profile

PROFILE = REPO_ROOT / "profiles" / "vllm-qwen3-8b-ngram.yaml"  # one L40S GPU, no namespace


def run(cluster: Cluster, *args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env=kubeconfig_env(cluster.kubeconfig))


@pytest.fixture
def gpu_imitation(tmp_path: Path) -> Iterator[Cluster]:
    """An imitation with one L40S node the profile's Pod fits on."""
    node = controllers.node_body(
        "gpu-a",
        gpus=8,
        labels={"nvidia.com/gpu.product": "NVIDIA-L40S"},
        taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
    )
    with Cluster.start(tmp_path, _force_imitation=True, nodes=(node,)) as cluster:
        yield cluster


class TestStatusExit:
    def test_pending_pods_exit_8_naming_the_cause(self, imitation: Cluster) -> None:
        assert run(imitation, "apply", str(PROFILE), "--offline").exit_code == 0
        imitation.settle()
        shown = run(imitation, "status", str(PROFILE))
        assert shown.exit_code == EXIT_NOT_READY == 8, shown.output
        assert "Deployment/qwen3-8b-ngram: 0/1 ready" in shown.output
        assert "InsufficientGPU" in shown.output or "Unschedulable" in shown.output
        assert "qwen3-8b-ngram is not ready (exit 8)" in shown.output

    def test_nothing_applied_is_not_ready(self, imitation: Cluster) -> None:
        shown = run(imitation, "status", str(PROFILE))
        assert shown.exit_code == 8, shown.output
        assert "no workloads of this profile" in shown.output

    def test_every_workload_ready_exits_0(self, gpu_imitation: Cluster) -> None:
        assert run(gpu_imitation, "apply", str(PROFILE), "--offline").exit_code == 0

        def ready() -> bool:
            gpu_imitation.settle()
            return run(gpu_imitation, "status", str(PROFILE)).exit_code == 0

        gpu_imitation.wait_for("the Deployment to be ready", ready, timeout=20)
        shown = run(gpu_imitation, "status", str(PROFILE))
        assert "Deployment/qwen3-8b-ngram: 1/1 ready" in shown.output
        assert "not ready" not in shown.output


class TestNoController:
    def test_a_leaderworkerset_without_its_controller_says_so(
        self, imitation: Cluster, tmp_path: Path
    ) -> None:
        imitation.install_platform_crds("lws")  # the CRD, and no LWS controller (as recorded)
        profile = write_profile(tmp_path, hardware={"tensor_parallel_size": 16})
        applied = run(imitation, "apply", str(profile), "--offline")
        assert applied.exit_code == 0, applied.output
        imitation.settle()
        shown = run(imitation, "status", str(profile))
        assert shown.exit_code == 8, shown.output
        lines = shown.output.splitlines()
        at = next(i for i, line in enumerate(lines) if line.startswith("LeaderWorkerSet/"))
        assert "NoController:" in lines[at + 1]
        assert "the LeaderWorkerSet controller seems absent" in lines[at + 1]
        assert "fix: install the LeaderWorkerSet controller" in lines[at + 2]

    def test_a_deployment_with_pods_is_not_flagged(self, imitation: Cluster) -> None:
        assert run(imitation, "apply", str(PROFILE), "--offline").exit_code == 0
        imitation.settle()
        assert "NoController" not in run(imitation, "status", str(PROFILE)).output


class TestDeleteFromLabels:
    def test_a_profile_that_no_longer_validates_deletes_its_objects(
        self, imitation: Cluster, tmp_path: Path
    ) -> None:
        assert run(imitation, "apply", str(PROFILE), "--offline").exit_code == 0
        old = yaml.safe_load(PROFILE.read_text(encoding="utf-8"))
        old["engine"]["removed_field"] = True  # an unknown key: validate refuses it (exit 3)
        old["hardware"] = {"gpu": "no-such-gpu"}
        broken = tmp_path / "old.yaml"
        broken.write_text(yaml.safe_dump(old), encoding="utf-8")
        assert run(imitation, "validate", str(broken), "--offline").exit_code == 3
        gone = run(imitation, "delete", str(broken))
        assert gone.exit_code == 0, gone.output
        assert "deployment/qwen3-8b-ngram deleted" in gone.output
        assert "service/qwen3-8b-ngram deleted" in gone.output

    def test_a_broken_metadata_is_still_refused(self, imitation: Cluster, tmp_path: Path) -> None:
        broken = tmp_path / "old.yaml"
        broken.write_text("apiVersion: x\nmetadata: {name: Not_A_Name}\n", encoding="utf-8")
        refused = run(imitation, "delete", str(broken))
        assert refused.exit_code == 3, refused.output
        assert "metadata.name" in refused.output
