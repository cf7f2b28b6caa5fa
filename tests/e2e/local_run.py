"""Drive `specdeploy run PROFILE --local` as a user would: a subprocess that prints the endpoint
when the engine is ready, and stops the engine when it gets Ctrl-C (SIGINT)."""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.e2e.servers import READY_TIMEOUT, VLLM_PYTHON, free_port, require_vllm, server_env

READY = re.compile(r"^ready: (http://\S+) \(pid (\d+)\)")


@dataclass
class LocalRun:
    """A running `specdeploy run --local` and what it printed."""

    url: str
    engine_pid: int
    process: subprocess.Popen[str]
    stdout: list[str] = field(default_factory=list)


def run_command(profile: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "orchestrator", "run", str(profile), "--local",
        "--python", str(VLLM_PYTHON), *extra,
    ]  # fmt: skip


@contextlib.contextmanager
def specdeploy_run(
    profile: Path, *, tmp_path: Path, extra: tuple[str, ...] = ()
) -> Iterator[LocalRun]:
    """Start the profile with the local runner on a free port; stop it with SIGINT on exit and
    check that it stopped cleanly (exit 0, "stopped", the engine process gone)."""
    require_vllm()
    argv = run_command(profile, "--port", str(free_port()), "--timeout", str(READY_TIMEOUT), *extra)
    process = subprocess.Popen(
        argv, env=server_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    run = _await_ready(process)
    try:
        yield run
    finally:
        process.send_signal(signal.SIGINT)  # what Ctrl-C does
        out, err = process.communicate(timeout=60)
        run.stdout.extend(out.splitlines())
    assert process.returncode == 0, f"run --local exited {process.returncode}:\n{err[-3000:]}"
    assert run.stdout[-1] == "stopped", run.stdout
    with pytest.raises(ProcessLookupError):
        os.kill(run.engine_pid, 0)


def _await_ready(process: subprocess.Popen[str]) -> LocalRun:
    assert process.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    lines: list[str] = []
    deadline = time.monotonic() + READY_TIMEOUT + 30
    while time.monotonic() < deadline:
        if not selector.select(timeout=1):
            continue
        line = process.stdout.readline()
        if not line:  # specdeploy exited before the engine was ready
            _, err = process.communicate(timeout=60)
            pytest.fail(f"run --local exited {process.returncode} before ready:\n{err[-4000:]}")
        lines.append(line.rstrip("\n"))
        match = READY.match(line)
        if match:
            return LocalRun(match.group(1), int(match.group(2)), process, lines)
    process.kill()
    pytest.fail(f"run --local printed no ready line in time; stdout so far: {lines}")
