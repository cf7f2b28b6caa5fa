"""The host CPU and memory formula of orchestrator/memory/host.py."""

from __future__ import annotations

from orchestrator.checkpoint.info import CheckpointInfo
from orchestrator.memory.gpus import GIB
from orchestrator.memory.host import WEIGHTS_FALLBACK_GIB, host_resources


def _checkpoint(gib: float | None) -> CheckpointInfo:
    size = None if gib is None else int(gib * GIB)
    return CheckpointInfo(ref="x/y", source="catalog", location="test", weight_bytes=size)


class TestHostResources:
    def test_one_gpu_without_weights_lands_on_vllms_guide_limit(self) -> None:
        host = host_resources(gpus_per_pod=1, shm_size="2Gi", target=None, draft=None)
        assert host.resources() == {
            "requests": {"cpu": "3", "memory": "14Gi"},
            "limits": {"cpu": "10", "memory": f"{14 + WEIGHTS_FALLBACK_GIB}Gi"},
        }

    def test_an_8b_target_with_a_draft_leaves_their_page_cache(self) -> None:
        host = host_resources(
            gpus_per_pod=1, shm_size="2Gi", target=_checkpoint(15.3), draft=_checkpoint(1.1)
        )
        assert host.memory_request_gib == 14
        assert host.memory_limit_gib == 14 + 17  # ceil(16.4)

    def test_ranks_add_processes(self) -> None:
        host = host_resources(gpus_per_pod=8, shm_size="2Gi", target=None, draft=None)
        assert host.cpu_request == 10
        assert host.cpu_limit == 20
        assert host.memory_request_gib == 2 + 10 * 4

    def test_an_unknown_draft_size_falls_back(self) -> None:
        host = host_resources(
            gpus_per_pod=1, shm_size="512Mi", target=_checkpoint(15.3), draft=_checkpoint(None)
        )
        assert host.memory_request_gib == 1 + 12
        assert host.memory_limit_gib == 13 + WEIGHTS_FALLBACK_GIB
