"""Container commands: the engine argv for one pod, or leader/worker commands across nodes.

A plan whose TP x PP exceeds hardware.gpus_per_node runs as one LeaderWorkerSet group per replica
(kubernetes-sigs/lws, API leaderworkerset.x-k8s.io/v1). LWS injects LWS_LEADER_ADDRESS,
LWS_GROUP_SIZE and LWS_WORKER_INDEX into every container (api/leaderworkerset/v1/
leaderworkerset_types.go); the kubelet expands `$(VAR)` in command and args, so no shell is needed
where the engine takes the values as flags.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from orchestrator.engines.base import EngineLaunch
from orchestrator.errors import IncompatibleError, ProfileError
from orchestrator.profile.schema import Profile

#: Label LWS puts on every pod of a group; the leader is index 0. The Service selects the leader.
LEADER_POD_LABELS: Final[Mapping[str, str]] = {"leaderworkerset.sigs.k8s.io/worker-index": "0"}
#: vLLM's multi-node recipe for LWS (docs.vllm.ai deployment/frameworks/lws, and
#: examples/online_serving/multi-node-serving.sh, shipped in the vllm/vllm-openai image): the
#: leader starts a Ray head and waits for LWS_GROUP_SIZE nodes, then runs `vllm serve`; workers
#: join the Ray cluster. vLLM then spreads TP x PP over the Ray cluster.
VLLM_RAY_SCRIPT: Final = "/vllm-workspace/examples/online_serving/multi-node-serving.sh"
#: SGLang multi-node flags (sglang_trtllm.md A6: docker/k8s-sglang-distributed-sts.yaml and the LWS
#: example use --nnodes/--node-rank/--dist-init-addr; port 20000 as in those examples).
SGLANG_DIST_PORT: Final = 20000


@dataclass(frozen=True)
class Topology:
    """How one model replica is spread: pods per group and GPUs per pod."""

    group_size: int
    gpus_per_pod: int


def topology(profile: Profile) -> Topology:
    """One pod holds TP x PP GPUs when they fit a node; otherwise the fewest equal nodes."""
    hardware = profile.hardware
    total = hardware.tensor_parallel_size * hardware.pipeline_parallel_size
    if hardware.device == "cpu" or total <= hardware.gpus_per_node:
        return Topology(group_size=1, gpus_per_pod=total)
    nodes = math.ceil(total / hardware.gpus_per_node)
    if total % nodes:
        raise ProfileError(
            f"hardware: tensor_parallel_size x pipeline_parallel_size = {total} GPUs cannot be "
            f"split evenly over {nodes} nodes of gpus_per_node={hardware.gpus_per_node}",
            why="every pod of a multi-node group gets the same number of GPUs",
            fix=f"make tensor_parallel_size x pipeline_parallel_size divisible by {nodes}, or set "
            "hardware.gpus_per_node to the GPUs your nodes really have",
        )
    return Topology(group_size=nodes, gpus_per_pod=total // nodes)


def container_command(argv: Sequence[str]) -> list[str]:
    """The argv as a Kubernetes command: `$(` is escaped as `$$(` so the kubelet never expands a
    variable reference that came from the profile (e.g. in extra_args)."""
    return [token.replace("$(", "$$(") for token in argv]


def leader_command(launch: EngineLaunch, topo: Topology) -> list[str]:
    """The command of the serving pod (the Deployment's pod, or the LWS leader)."""
    if topo.group_size == 1:
        return container_command(launch.argv)
    return _builder(launch).leader(launch, topo)


def worker_command(launch: EngineLaunch, topo: Topology) -> list[str]:
    """The command of the other pods of a LeaderWorkerSet group."""
    return _builder(launch).worker(launch, topo)


@dataclass(frozen=True)
class _MultiNode:
    leader: Callable[[EngineLaunch, Topology], list[str]]
    worker: Callable[[EngineLaunch, Topology], list[str]]


def _vllm_leader(launch: EngineLaunch, topo: Topology) -> list[str]:
    del topo
    serve = shlex.join(container_command(launch.argv))
    ray = f"bash {VLLM_RAY_SCRIPT} leader --ray_cluster_size=$(LWS_GROUP_SIZE)"
    return ["/bin/sh", "-c", f"{ray} && exec {serve}"]


def _vllm_worker(launch: EngineLaunch, topo: Topology) -> list[str]:
    del launch, topo
    return ["/bin/sh", "-c", f"bash {VLLM_RAY_SCRIPT} worker --ray_address=$(LWS_LEADER_ADDRESS)"]


def _sglang_node(launch: EngineLaunch, topo: Topology) -> list[str]:
    # Every node runs the same launch_server with its rank; only rank 0 serves HTTP.
    return [
        *container_command(launch.argv),
        "--nnodes",
        str(topo.group_size),
        "--node-rank",
        "$(LWS_WORKER_INDEX)",
        "--dist-init-addr",
        f"$(LWS_LEADER_ADDRESS):{SGLANG_DIST_PORT}",
    ]


_BUILDERS: Final[Mapping[str, _MultiNode]] = {
    "vllm": _MultiNode(leader=_vllm_leader, worker=_vllm_worker),
    "sglang": _MultiNode(leader=_sglang_node, worker=_sglang_node),
}


def _builder(launch: EngineLaunch) -> _MultiNode:
    builder = _BUILDERS.get(launch.engine)
    if builder is None:
        raise IncompatibleError(
            f"engine.name: {launch.engine!r} needs more GPUs than hardware.gpus_per_node, and "
            f"specdeploy renders multi-node groups only for {', '.join(sorted(_BUILDERS))}",
            why="TensorRT-LLM runs across nodes through MPI (trtllm-llmapi-launch), which these "
            "manifests do not set up",
            fix="lower hardware.tensor_parallel_size x pipeline_parallel_size to fit one node, "
            "or use engine.name: vllm or sglang",
        )
    return builder
