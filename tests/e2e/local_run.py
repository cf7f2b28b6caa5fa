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
    with specdeploy_runs([profile], tmp_path=tmp_path, extra=extra) as (run,):
        yield run


@contextlib.contextmanager
def specdeploy_runs(
    profiles: list[Path], *, tmp_path: Path, extra: tuple[str, ...] = ()
) -> Iterator[list[LocalRun]]:
    """`specdeploy_run` for several profiles at once: every runner is started before the first
    is waited for, so the engines load side by side; all are stopped (and checked) on exit."""
    require_vllm()
    processes: list[subprocess.Popen[str]] = []
    runs: list[LocalRun] = []
    try:
        for profile in profiles:
            argv = run_command(
                profile, "--port", str(free_port()), "--timeout", str(READY_TIMEOUT), *extra
            )
            processes.append(
                subprocess.Popen(
                    argv,
                    env=server_env(tmp_path),
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
        runs.extend(_await_ready(process) for process in processes)
        yield runs
    finally:
        errors = [_stop(process, run) for process, run in zip(processes, runs, strict=False)]
        for process in processes[len(runs) :]:  # never ready: the failure is already raised
            process.send_signal(signal.SIGINT)  # the runner stops its engine, loading or not
            try:
                process.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.communicate(timeout=60)
    for run, err in zip(runs, errors, strict=True):
        assert run.process.returncode == 0, (
            f"run --local exited {run.process.returncode}:\n{err[-3000:]}"
        )
        assert run.stdout[-1] == "stopped", run.stdout
        with pytest.raises(ProcessLookupError):
            os.kill(run.engine_pid, 0)


def _stop(process: subprocess.Popen[str], run: LocalRun) -> str:
    """SIGINT, as Ctrl-C; the runner's remaining stdout goes to `run`, its stderr is returned."""
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    run.stdout.extend(out.splitlines())
    return err


def _await_ready(process: subprocess.Popen[str]) -> LocalRun:
    """Read the runner's stdout until its ready line. The pipe is read directly, not through
    its buffered text wrapper: a runner that printed several lines before it is read (one of
    several started together) has them all in one read, and a buffered readline would keep the
    ready line in its buffer while the selector waited on an empty pipe."""
    assert process.stdout is not None
    fd = process.stdout.fileno()
    selector = selectors.DefaultSelector()
    selector.register(fd, selectors.EVENT_READ)
    lines: list[str] = []
    pending = b""
    deadline = time.monotonic() + READY_TIMEOUT + 30
    while time.monotonic() < deadline:
        if not selector.select(timeout=1):
            continue
        chunk = os.read(fd, 65536)
        if not chunk:  # specdeploy exited before the engine was ready
            _, err = process.communicate(timeout=60)
            pytest.fail(f"run --local exited {process.returncode} before ready:\n{err[-4000:]}")
        *complete, pending = (pending + chunk).split(b"\n")
        for index, raw in enumerate(complete):
            lines.append(raw.decode())
            match = READY.match(lines[-1])
            if match:  # what followed it in the same read stays in the run's stdout
                lines += [line.decode() for line in complete[index + 1 :]]
                lines += [pending.decode()] if pending else []
                return LocalRun(match.group(1), int(match.group(2)), process, lines)
    process.kill()
    pytest.fail(f"run --local printed no ready line in time; stdout so far: {lines}")
