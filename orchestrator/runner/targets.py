"""Run targets by name: `local` (a child process on this host) and `docker` (not yet here)."""

from __future__ import annotations

from typing import Literal

from orchestrator.engines.base import EngineLaunch
from orchestrator.errors import DeployError
from orchestrator.runner.base import Echo, RunOptions, RunTarget
from orchestrator.runner.local import LocalProcess

TargetName = Literal["local", "docker"]


class DockerNotAvailable:
    """Placeholder for the Docker target: `specdeploy run --docker` is not wired up yet."""

    def run(self, launch: EngineLaunch, options: RunOptions, *, echo: Echo, progress: Echo) -> None:
        raise DeployError(
            f"running {launch.engine} in Docker is not available yet",
            why="the Docker run target is still being built (Kubernetes/Docker issue)",
            fix="use --local to run the engine installed on this host "
            "(e.g. --local --python .venv-vllm/bin/python), or `specdeploy render` and "
            "start the image yourself",
        )


def run_target(name: TargetName) -> RunTarget:
    """The target for `specdeploy run --local|--docker`."""
    if name == "local":
        return LocalProcess()
    return DockerNotAvailable()
