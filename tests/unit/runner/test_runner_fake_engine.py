"""The local runner's process handling, with a fake engine (a stdlib HTTP server) instead of vLLM:
readiness, Ctrl-C, SIGKILL after the stop timeout, the engine's refusal, a missing executable.
Fast (seconds), loopback only."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from orchestrator.engines.base import EngineLaunch
from orchestrator.errors import DeployError
from orchestrator.runner.base import RunOptions
from orchestrator.runner.engine_log import refusal
from orchestrator.runner.local import LocalProcess, local_argv
from tests.e2e.servers import free_port

pytestmark = pytest.mark.e2e

FAKE_ENGINE = """
import http.server, os, signal, sys, time
port = int(sys.argv[sys.argv.index("--port") + 1])
mode = os.environ.get("FAKE_MODE", "serve")
if mode == "refuse":
    print("INFO starting", flush=True)
    print("Traceback (most recent call last):", flush=True)
    print("ValueError: --max-model-len 9999 is larger than the model's 4096", flush=True)
    sys.exit(1)
if mode == "stubborn":
    signal.signal(signal.SIGTERM, lambda *a: print("ignoring SIGTERM", flush=True))
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
    def log_message(self, *a):
        pass
time.sleep(0.5)
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


def fake_launch(tmp_path: Path) -> EngineLaunch:
    script = tmp_path / "fake_engine.py"
    script.write_text(FAKE_ENGINE)
    return EngineLaunch(
        engine="vllm",
        version="0.32.0",
        image="unused",
        argv=("python3", str(script), "--host", "127.0.0.1", "--port", "8000"),
        port=8000,
        health_path="/health",
        ready_path="/health",
        metrics_path="/metrics",
    )


def run_until_ready_then_interrupt(launch: EngineLaunch, options: RunOptions) -> list[str]:
    """Run in the foreground; once "ready" is echoed, deliver SIGTERM to ourselves (the runner
    treats it like Ctrl-C) and return everything echoed."""
    lines: list[str] = []

    def echo(line: str) -> None:
        lines.append(line)
        if line.startswith("ready:"):
            threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM)).start()

    LocalProcess().run(launch, options, echo=echo, progress=lambda _: None)
    return lines


def test_ready_endpoint_then_clean_stop(tmp_path: Path) -> None:
    port = free_port()
    options = RunOptions(python=Path(sys.executable), port=port, ready_timeout=30)
    lines = run_until_ready_then_interrupt(fake_launch(tmp_path), options)
    assert any(line.startswith(f"ready: http://127.0.0.1:{port} (pid ") for line in lines), lines
    assert lines[-1] == "stopped"


def test_an_engine_ignoring_sigterm_is_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_MODE", "stubborn")
    options = RunOptions(python=Path(sys.executable), port=free_port(), stop_timeout=1)
    start = time.monotonic()
    lines = run_until_ready_then_interrupt(fake_launch(tmp_path), options)
    assert lines[-1] == "stopped"
    assert time.monotonic() - start < 20


def test_the_engines_refusal_is_the_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_MODE", "refuse")
    options = RunOptions(python=Path(sys.executable), port=free_port())
    with pytest.raises(DeployError) as caught:
        LocalProcess().run(fake_launch(tmp_path), options, echo=lambda _: None, progress=print)
    error = caught.value
    assert error.what == "vllm exited with code 1 before it was ready"
    assert (
        "vllm said: ValueError: --max-model-len 9999 is larger than the model's 4096" in error.why
    )
    assert error.fix


def test_a_missing_engine_says_how_to_point_at_it(tmp_path: Path) -> None:
    launch = fake_launch(tmp_path)
    launch = EngineLaunch(**{**launch.__dict__, "argv": ("vllm", "serve", "m")})
    with pytest.raises(DeployError) as caught:
        local_argv(launch, RunOptions(python=tmp_path / "bin" / "python"))
    assert "'vllm' was not found" in caught.value.what
    assert "--engine-bin" in caught.value.fix


def test_port_override_and_engine_beside_python(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "vllm").write_text("#!/bin/sh\n")
    launch = EngineLaunch(
        **{**fake_launch(tmp_path).__dict__, "argv": ("vllm", "serve", "m", "--port", "8000")}
    )
    argv = local_argv(launch, RunOptions(python=tmp_path / "bin" / "python", port=9123))
    assert argv == [str(tmp_path / "bin" / "vllm"), "serve", "m", "--port", "9123"]


def test_refusal_reads_vllm_log_prefixes_and_pydantic_detail(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    log.write_text(
        "(APIServer pid=1) INFO 11-29 09:46:52 [api.py:1] starting\n"
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig\n"
        "  Value error, Target and draft model should have the same vocabulary size.\n"
        "    For further information visit https://errors.pydantic.dev/2.14/v/value_error\n"
    )
    assert refusal(log) == (
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig "
        "Value error, Target and draft model should have the same vocabulary size."
    )
    log.write_text("usage: vllm serve ...\nvllm serve: error: unrecognized arguments: --x 1\n")
    assert refusal(log) == "vllm serve: error: unrecognized arguments: --x 1"
    log.write_text("nothing to see\n")
    assert refusal(log) is None
