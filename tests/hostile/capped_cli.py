"""Run the real `specdeploy` CLI in a subprocess the way an attacker's input would meet it: with a
hard memory cap (RLIMIT_AS) and a wall-clock limit, and check what every hostile case must end
in: a documented exit code, a message, and no traceback."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support import REPO_ROOT

#: Address-space cap for the CLI process. `validate` peaks below 256 MiB; the alias bomb this
#: suite feeds it needed 5 GB before the fix.
MEMORY_CAP_BYTES = 512 * 1024 * 1024
#: Wall-clock limit per run; a case that needs it has hung.
TIME_LIMIT_S = 30.0
#: Exit codes the contract documents (README, docs/cli.md); 1 is "other user error".
DOCUMENTED_EXIT_CODES = frozenset({0, 1, 2, 3, 4, 5, 6, 7})
#: What `specdeploy(..., full_disk=True)` runs instead of `python -m orchestrator`: the CLI in a
#: process whose os.write fails as a full disk does (ENOSPC) for every file it opens (stdout and
#: stderr, descriptors 1 and 2, still work).
_FULL_DISK = """
import errno, os, sys
real_write = os.write
def full(fd, data):
    if fd > 2:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return real_write(fd, data)
os.write = full
from orchestrator.cli import main
sys.argv = ["specdeploy", *sys.argv[1:]]
main()
"""


@dataclass(frozen=True)
class Run:
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP_BYTES, MEMORY_CAP_BYTES))


def specdeploy(
    *args: str,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    time_limit: float = TIME_LIMIT_S,
    full_disk: bool = False,
) -> Run:
    """Run `python -m orchestrator ARGS` under the caps (on a simulated full disk with
    `full_disk`); fail the test if it hangs, crashes with a traceback or exits with an
    undocumented code."""
    environment = {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT),
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        **(env or {}),
    }
    start = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, *(("-c", _FULL_DISK) if full_disk else ("-m", "orchestrator")), *args],
            capture_output=True,
            text=True,
            env=environment,
            cwd=cwd or REPO_ROOT,
            timeout=time_limit,
            preexec_fn=_cap_memory,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"specdeploy {' '.join(args)} hung for {time_limit} s") from exc
    run = Run(done.returncode, done.stdout, done.stderr, time.monotonic() - start)
    assert "Traceback" not in run.output, run.output
    assert "MemoryError" not in run.output, run.output
    assert run.returncode in DOCUMENTED_EXIT_CODES, (run.returncode, run.output)
    return run
