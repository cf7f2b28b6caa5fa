"""Run targets by name: `local` (a child process on this host); Docker lives in deploy/local_docker."""

from __future__ import annotations

from typing import Literal

from orchestrator.runner.base import RunTarget
from orchestrator.runner.local import LocalProcess

TargetName = Literal["local", "docker"]


def run_target(name: TargetName) -> RunTarget:
    """The process target for `specdeploy run --local` (Docker runs through
    orchestrator.deploy.local_docker.run_docker, which needs the whole plan)."""
    if name != "local":
        raise ValueError(f"no process target named {name!r}")
    return LocalProcess()
