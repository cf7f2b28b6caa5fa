"""The run-target seam: where `specdeploy run` starts a validated engine launch."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from orchestrator.engines.base import EngineLaunch

Echo = Callable[[str], None]


@dataclass(frozen=True)
class RunOptions:
    """How to run a launch on this host; every field has a safe default."""

    engine_bin: Path | None = None
    """The engine executable to use instead of argv[0] (e.g. .venv-vllm/bin/vllm)."""
    python: Path | None = None
    """The interpreter for `python3 -m ...` launches; its bin/ is also searched for argv[0]."""
    port: int | None = None
    """Listen on this port instead of the rendered one."""
    ready_timeout: float = 600.0
    """Seconds to wait for the health path before giving up."""
    stop_timeout: float = 20.0
    """Seconds between SIGTERM and SIGKILL when stopping."""
    log_file: Path | None = None
    """Where the engine's output goes; a new file in a temporary run directory by default."""


class RunTarget(Protocol):
    """Starts one engine launch, reports readiness, and stops it on Ctrl-C."""

    def run(self, launch: EngineLaunch, options: RunOptions, *, echo: Echo, progress: Echo) -> None:
        """Run in the foreground until Ctrl-C; raise DeployError if the engine fails."""
        ...
