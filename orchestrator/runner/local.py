"""Local process target: run the rendered engine command on this host and keep it in the
foreground until Ctrl-C.

The engine runs in its own process group (so Ctrl-C reaches specdeploy, which then stops the whole
group: SIGTERM, then SIGKILL after `stop_timeout`), with its output in a log file. specdeploy polls
the launch's readiness path; if the engine exits first, its own refusal is read from the log and
raised as a DeployError (exit 6).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Final

from orchestrator.engines.base import EngineLaunch
from orchestrator.errors import DeployError
from orchestrator.runner import engine_log
from orchestrator.runner.base import Echo, RunOptions
from orchestrator.shell_text import shell_line

POLL_SECONDS: Final = 1.0
PROBE_TIMEOUT: Final = 2.0
_PYTHON_NAMES: Final = frozenset({"python", "python3"})
_ANY_ADDRESS: Final = frozenset({"0.0.0.0", "::", ""})


class LocalProcess:
    """Runs an EngineLaunch as a child process group on this host."""

    def run(self, launch: EngineLaunch, options: RunOptions, *, echo: Echo, progress: Echo) -> None:
        with _sigterm_as_interrupt():
            try:
                with serving(launch, options, echo=echo, progress=progress) as served:
                    echo(f"ready: {served.url} (pid {served.process.pid}); press Ctrl-C to stop")
                    _wait_exit(served.process, launch, served.log_path)
            except KeyboardInterrupt:
                pass
        echo("stopped")


@dataclass(frozen=True)
class Served:
    """A ready engine started by `serving`."""

    url: str
    """Its base URL (no /v1)."""
    process: subprocess.Popen[bytes]
    log_path: Path


@contextlib.contextmanager
def serving(
    launch: EngineLaunch, options: RunOptions, *, echo: Echo, progress: Echo
) -> Iterator[Served]:
    """Start the engine, wait until its readiness path answers, yield it, and stop its whole
    process group on the way out, whatever ends the block (Ctrl-C included). DeployError when
    it exits before it is ready, is not ready in time, or has exited by the end of the block."""
    argv = local_argv(launch, options)
    run_dir = Path(tempfile.mkdtemp(prefix=f"specdeploy-{launch.engine}-"))
    for name, content in launch.config_files.items():
        (run_dir / name).write_text(content)
    log_path = options.log_file or run_dir / "engine.log"
    url = base_url(argv, launch.port if options.port is None else options.port)
    echo(f"starting {launch.engine} {launch.version}: {shell_line(argv, launch.env)}")
    echo(f"engine log: {log_path}")
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            argv,
            cwd=run_dir,
            env={**os.environ, **launch.env},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            try:
                _wait_ready(process, launch, url, log_path, options, progress)
                yield Served(url, process, log_path)
            except KeyboardInterrupt:
                echo(f"stopping {launch.engine} (pid {process.pid}) ...")
                raise
            if process.poll() is not None:
                raise _died(launch, process.returncode, log_path, before_ready=False)
        finally:
            stop(process, options.stop_timeout)


def local_argv(launch: EngineLaunch, options: RunOptions) -> list[str]:
    """The rendered argv with argv[0] resolved on this host and the port overridden if asked."""
    argv = list(launch.argv)
    argv[0] = _executable(argv[0], launch, options)
    if options.port is not None and "--port" in argv:
        argv[argv.index("--port") + 1] = str(options.port)
    return argv


def base_url(argv: list[str], port: int) -> str:
    """Where the engine answers: its --host (loopback when it binds every address) and port."""
    host = argv[argv.index("--host") + 1] if "--host" in argv[:-1] else "127.0.0.1"
    if host in _ANY_ADDRESS:
        host = "127.0.0.1"
    return f"http://{host}:{port}"


def stop(process: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM the engine's process group, then SIGKILL it if it outlives `timeout`."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _executable(name: str, launch: EngineLaunch, options: RunOptions) -> str:
    if name in _PYTHON_NAMES:
        chosen = options.python or (options.engine_bin and Path(options.engine_bin))
        found = str(chosen) if chosen else shutil.which(name)
    elif options.engine_bin is not None:
        found = str(options.engine_bin)
    elif options.python is not None:
        # A venv's console scripts sit beside its python (do not resolve the python symlink).
        beside = Path(options.python).parent / name
        found = str(beside) if beside.exists() else None
    else:
        found = shutil.which(name)
    if found is None or not Path(found).exists():
        raise DeployError(
            f"cannot run {launch.engine} locally: {name!r} was not found"
            + (f" (looked beside {options.python})" if options.python else " on PATH"),
            why=f"the rendered launch starts with {name!r}, and `run --local` executes it on "
            "this host",
            fix=f"install {launch.engine} {launch.version} on this host, or pass --engine-bin "
            f"PATH (the {name} executable) or --python PATH (a venv's python, e.g. "
            ".venv-vllm/bin/python from .ci/install-referees.sh)",
        )
    return str(Path(found).absolute())  # the engine runs in its own run directory


def _wait_ready(
    process: subprocess.Popen[bytes],
    launch: EngineLaunch,
    url: str,
    log_path: Path,
    options: RunOptions,
    progress: Echo,
) -> None:
    start = time.monotonic()
    probe_url = url + launch.ready_path
    while True:
        if process.poll() is not None:
            raise _died(launch, process.returncode, log_path, before_ready=True)
        if _answers(probe_url):
            progress("")
            return
        waited = time.monotonic() - start
        if waited > options.ready_timeout:
            stop(process, options.stop_timeout)
            raise DeployError(
                f"{launch.engine} was not ready after {options.ready_timeout:.0f} s "
                f"({probe_url} did not answer 200)",
                why="the engine is still loading or is stuck; its log ends with:\n"
                + _indented_tail(log_path),
                fix=f"read {log_path}; raise --timeout if the model is large",
            )
        progress(f"waiting for {launch.engine} at {probe_url} ... {waited:.0f} s")
        time.sleep(POLL_SECONDS)


def _wait_exit(process: subprocess.Popen[bytes], launch: EngineLaunch, log_path: Path) -> None:
    returncode = process.wait()
    raise _died(launch, returncode, log_path, before_ready=False)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=PROBE_TIMEOUT) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _died(
    launch: EngineLaunch, returncode: int, log_path: Path, *, before_ready: bool
) -> DeployError:
    when = "before it was ready" if before_ready else "while serving"
    reason = engine_log.refusal(log_path)
    said = f"{launch.engine} said: {reason}\n" if reason else ""
    return DeployError(
        f"{launch.engine} exited with code {returncode} {when}",
        why=f"{said}last lines of its log ({log_path}):\n{_indented_tail(log_path)}",
        fix="change the profile so the engine accepts it (the engine's message above names the "
        "setting); if `specdeploy validate` passed, that is a specdeploy bug worth reporting",
    )


def _indented_tail(log_path: Path) -> str:
    return "\n".join(f"    | {line}" for line in engine_log.tail(log_path))


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """Treat SIGTERM to specdeploy like Ctrl-C, so the engine is stopped either way."""

    def _interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
