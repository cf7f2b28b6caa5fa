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
from orchestrator.errors import IncompatibleError, ProfileError
from orchestrator.profile.schema import Profile

#: Label LWS puts on every pod of a group; the leader is index 0. The Service selects the leader.
LEADER_POD_LABELS: Final[Mapping[str, str]] = {"leaderworkerset.sigs.k8s.io/worker-index": "0"}
#: What LWS injects into each pod of a group, as kubelet references (expanded in command/args).
LWS_WORKER_INDEX: Final = "$(LWS_WORKER_INDEX)"
LWS_LEADER_ADDRESS: Final = "$(LWS_LEADER_ADDRESS)"


@dataclass(frozen=True)
class Topology:
    """How one model replica is spread: pods per group and GPUs per pod."""

    group_size: int
    gpus_per_pod: int


def topology(profile: Profile) -> Topology:
    """One pod holds TP x PP GPUs when they fit a node; otherwise the fewest equal nodes. The
    `engine.multi-node` rule reports an uneven split at validate time; this is the backstop."""
    hardware = profile.hardware
    total, nodes = hardware.gpus_per_replica, hardware.nodes_per_replica
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
    return _group_commands(launch, topo)[0]


def worker_command(launch: EngineLaunch, topo: Topology) -> list[str]:
    """The command of the other pods of a LeaderWorkerSet group."""
    return _group_commands(launch, topo)[1]


def _group_commands(launch: EngineLaunch, topo: Topology) -> tuple[list[str], list[str]]:
    engine = ENGINES[launch.engine]
    if engine.multi_node_gap is not None:  # engine.multi-node refuses this at validate time
        raise IncompatibleError(
            f"engine.name: {launch.engine!r} needs more GPUs than hardware.gpus_per_node, and "
            f"specdeploy renders no multi-node group for it",
            why=engine.multi_node_gap,
            fix="lower hardware.tensor_parallel_size x pipeline_parallel_size to fit one node, "
            "or use an engine.name with multi-node support (specdeploy explain engine.multi-node)",
        )
    return engine.multi_node(
        container_command(launch.argv),
        nodes=topo.group_size,
        rank=LWS_WORKER_INDEX,
        leader_address=LWS_LEADER_ADDRESS,
    )
