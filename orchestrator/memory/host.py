"""Host CPU and memory one vLLM serving pod needs, for platforms that would otherwise give the
pod someone else's numbers (kserve-runtime: KServe merges our container into
`kserve-vllmserver`'s, whose requests and limits are `cpu: 1, memory: 2Gi`).

The formula, per pod (one replica on one node), conservative on purpose because the failure it
prevents is an OOM kill or a throttled engine, while the cost of too much is a request the
scheduler must find room for:

- processes = GPU ranks in the pod (TP x PP, one worker process each) + the engine core + the
  API server. vLLM V1 runs the API server and the engine core as separate processes and, from
  TP x PP > 1, one worker process per rank (MultiprocExecutor); at one rank the engine core
  hosts the worker, counted separately anyway.
- memory request = /dev/shm + processes x PROCESS_GIB. The `dshm` emptyDir is tmpfs
  (medium: Memory), and tmpfs pages count against the container's memory limit; vLLM's
  shared-memory broadcast queues live there from TP > 1. Each process imports torch and, for
  ranks, creates a CUDA context whose host side (driver, cuBLAS/cuDNN kernels, pinned staging
  buffers) is resident RSS; the API server holds the tokenizer and request state.
- memory limit = request + the checkpoint's page cache: vLLM 0.32 loads safetensors lazily
  through mmap (`LoadConfig.safetensors_load_strategy` None -> lazy,
  https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/config/load.py#L65-L73), so the
  weights (target and draft, loaded in the same worker processes) pass through page cache
  charged to the pod. Clean page cache is reclaimable, so this is headroom for a fast load,
  not a hard need; when the weight sizes are unknown it is WEIGHTS_FALLBACK_GIB.
- cpu request = processes (each process keeps one core busy: the ranks launch kernels, the
  engine core schedules, the API server tokenizes); cpu limit = max(CPU_LIMIT_FLOOR,
  2 x request), room for start-up compilation threads. Both must be set: limits and requests
  merge per key, so a key we leave out keeps the runtime's `cpu: 1`.

Calibration: at one GPU this gives requests of 3 CPUs / 14 GiB and limits of 10 CPUs /
20 GiB with unknown weights; vLLM's own Kubernetes guide gives its 7B one-GPU Deployment
requests of 2 CPUs / 6G and limits of 10 CPUs / 20G
(https://github.com/vllm-project/vllm/blob/07b3dbf3a5dc86a5caaf71b512fb1b3af07e5e37/docs/deployment/k8s.md,
"Deployment with GPUs"). We request more than the guide because a request below what stays
resident lets the node overcommit into an eviction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from orchestrator.checkpoint.info import CheckpointInfo
from orchestrator.memory.gpus import GIB

#: Resident host memory per process (torch, CUDA context host side, tokenizer): an allowance,
#: chosen so one GPU lands on vLLM's Kubernetes guide's 20G limit (module docstring).
PROCESS_GIB: Final = 4
#: Processes besides the GPU ranks: vLLM V1's API server and engine core.
EXTRA_PROCESSES: Final = 2
#: Page-cache headroom when the checkpoint's size is unknown (guide calibration, above).
WEIGHTS_FALLBACK_GIB: Final = 6
#: vLLM's Kubernetes guide's CPU limit for one GPU (module docstring).
CPU_LIMIT_FLOOR: Final = 10


@dataclass(frozen=True)
class HostResources:
    """Requests and limits of the engine container, as Kubernetes quantities."""

    cpu_request: int
    cpu_limit: int
    memory_request_gib: int
    memory_limit_gib: int

    def resources(self) -> dict[str, dict[str, str]]:
        return {
            "requests": {"cpu": str(self.cpu_request), "memory": f"{self.memory_request_gib}Gi"},
            "limits": {"cpu": str(self.cpu_limit), "memory": f"{self.memory_limit_gib}Gi"},
        }


def host_resources(
    *,
    gpus_per_pod: int,
    shm_size: str,
    target: CheckpointInfo | None,
    draft: CheckpointInfo | None,
) -> HostResources:
    """The formula of the module docstring. `draft` is the separately loaded proposer (None for
    a baseline twin, mtp and ngram)."""
    processes = max(gpus_per_pod, 1) + EXTRA_PROCESSES
    request = _gib(shm_size) + processes * PROCESS_GIB
    checkpoints = [c for c in (target, draft) if c is not None]
    sizes = [c.weight_bytes for c in checkpoints if c.weight_bytes is not None]
    if checkpoints and len(sizes) == len(checkpoints):
        weights = math.ceil(sum(sizes) / GIB)
    else:
        weights = WEIGHTS_FALLBACK_GIB
    return HostResources(
        cpu_request=processes,
        cpu_limit=max(CPU_LIMIT_FLOOR, 2 * processes),
        memory_request_gib=request,
        memory_limit_gib=request + weights,
    )


def _gib(quantity: str) -> int:
    """A binary Kubernetes quantity ("2Gi", "512Mi") in whole GiB, rounded up."""
    units = {"Gi": 1, "Mi": 1 / 1024, "Ti": 1024}
    for suffix, factor in units.items():
        if quantity.endswith(suffix):
            return math.ceil(float(quantity.removesuffix(suffix)) * factor)
    raise ValueError(f"not a binary quantity: {quantity!r}")
