"""Container commands: the engine argv for one pod, or leader/worker commands across nodes.

A plan whose TP x PP exceeds hardware.gpus_per_node runs as one LeaderWorkerSet group per replica
(kubernetes-sigs/lws, API leaderworkerset.x-k8s.io/v1). LWS injects LWS_LEADER_ADDRESS,
LWS_GROUP_SIZE and LWS_WORKER_INDEX into every container (api/leaderworkerset/v1/
leaderworkerset_types.go); the kubelet expands `$(VAR)` in command and args, so no shell is needed
where the engine takes the values as flags. The engine modules spell their own multi-node flags.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from orchestrator.engines import ENGINES
from orchestrator.engines.base import EngineLaunch
from orchestrator.errors import IncompatibleError
from orchestrator.profile.schema import Profile

#: Label LWS puts on every pod of a group; the leader is index 0. The Service selects the leader
#: (https://github.com/kubernetes-sigs/lws/blob/47a6181f092baa7be1475a75480fa717ca4d5647/api/leaderworkerset/v1/leaderworkerset_types.go).
LEADER_POD_LABELS: Final[Mapping[str, str]] = {"leaderworkerset.sigs.k8s.io/worker-index": "0"}
#: What LWS injects into each pod of a group, as kubelet references (expanded in command/args; as
#: in https://github.com/kubernetes-sigs/lws/blob/v0.7.0/docs/examples/vllm/GPU/lws.yaml).
LWS_WORKER_INDEX: Final = "$(LWS_WORKER_INDEX)"
LWS_LEADER_ADDRESS: Final = "$(LWS_LEADER_ADDRESS)"
#: The finding id of a replica spread over nodes that cannot be rendered (see `topology`).
MULTI_NODE_RULE: Final = "engine.multi-node"


@dataclass(frozen=True)
class Topology:
    """How one model replica is spread: pods per group and GPUs per pod."""

    group_size: int
    gpus_per_pod: int


def topology(profile: Profile) -> Topology:
    """One pod holds TP x PP GPUs when they fit a node; otherwise the fewest equal nodes, which
    needs the GPUs to split evenly over them and an engine for which specdeploy renders the
    leader and worker commands (vLLM over Ray, SGLang with --nnodes). Raises the
    `engine.multi-node` finding otherwise."""
    hardware = profile.hardware
    total, nodes = hardware.gpus_per_replica, hardware.nodes_per_replica
    if nodes == 1:
        return Topology(group_size=1, gpus_per_pod=total)
    shape = (
        f"hardware.tensor_parallel_size x pipeline_parallel_size = {total} GPUs over "
        f"gpus_per_node={hardware.gpus_per_node} needs {nodes} nodes"
    )
    gap = ENGINES[profile.engine.name].multi_node_gap
    if gap is not None:
        capable = sorted(name for name, engine in ENGINES.items() if engine.multi_node_gap is None)
        raise IncompatibleError(
            f"{shape}, and specdeploy renders no multi-node group for {profile.engine.name}",
            why=gap,
            fix=f"fit one node (tensor_parallel_size x pipeline_parallel_size <= "
            f"{hardware.gpus_per_node}), or use engine.name {' or '.join(capable)}",
            rule=MULTI_NODE_RULE,
            field="hardware.tensor_parallel_size",
        )
    if total % nodes:
        raise IncompatibleError(
            f"{shape}, and {total} GPUs do not split evenly over {nodes} nodes",
            why="every pod of a multi-node group gets the same number of GPUs",
            fix=f"make tensor_parallel_size x pipeline_parallel_size divisible by {nodes}, or set "
            "hardware.gpus_per_node to the GPUs your nodes really have",
            rule=MULTI_NODE_RULE,
            field="hardware.gpus_per_node",
        )
    return Topology(group_size=nodes, gpus_per_pod=total // nodes)


def container_command(argv: Sequence[str]) -> list[str]:
    """The argv as a Kubernetes command. The kubelet expands `$(VAR)` in command and args and
    turns `$$` into `$` (https://github.com/kubernetes/kubernetes/blob/v1.33.0/third_party/forked/
    golang/expansion/expand.go), so every `$` is doubled: the container receives exactly the
    argv, and a `$(HF_TOKEN)` or `$$(HF_TOKEN)` written in the profile never becomes the
    secret's value."""
    return [token.replace("$", "$$") for token in argv]


def leader_command(launch: EngineLaunch, topo: Topology) -> list[str]:
    """The command of the serving pod (the Deployment's pod, or the LWS leader)."""
    if topo.group_size == 1:
        return container_command(launch.argv)
    return _group_commands(launch, topo)[0]


def worker_command(launch: EngineLaunch, topo: Topology) -> list[str]:
    """The command of the other pods of a LeaderWorkerSet group."""
    return _group_commands(launch, topo)[1]


def _group_commands(launch: EngineLaunch, topo: Topology) -> tuple[list[str], list[str]]:
    # `topology` has already refused engines without multi-node support.
    return ENGINES[launch.engine].multi_node(
        container_command(launch.argv),
        nodes=topo.group_size,
        rank=LWS_WORKER_INDEX,
        leader_address=LWS_LEADER_ADDRESS,
    )
