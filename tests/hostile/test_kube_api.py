"""A Kubernetes API that does not behave: `apply`, `status` and `delete` end with exit 6 within
their request timeout, and say what happened (no answer, nothing listening), never hang."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.cli import cli
from tests.support import REPO_ROOT
from tests.unit.deploy.test_deploy_cmd import kubeconfig

PROFILE = REPO_ROOT / "profiles" / "vllm-qwen3-8b-ngram.yaml"


@pytest.fixture
def silent_server() -> Iterator[str]:
    """Accepts TCP connections and never answers (a hung API server or proxy)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join(2)
    for connection in held:
        connection.close()
    listener.close()


def closed_port() -> str:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there now
    return f"http://127.0.0.1:{port}"


@pytest.mark.parametrize("command", ["apply", "status", "delete"])
def test_a_silent_api_server_fails_within_the_request_timeout(
    silent_server: str, tmp_path: Path, command: str
) -> None:
    env = {"KUBECONFIG": str(kubeconfig(tmp_path, silent_server))}
    args = [command, str(PROFILE), "--request-timeout", "1"]
    args += ["--offline"] if command == "apply" else []
    start = time.monotonic()
    result = CliRunner().invoke(cli, args, env=env)
    elapsed = time.monotonic() - start
    assert result.exit_code == 6, result.output
    assert "did not answer in time" in result.output and "fix:" in result.output
    assert "Traceback" not in result.output
    assert elapsed < 10, f"{command} took {elapsed:.1f} s against a 1 s request timeout"


def test_nothing_listening_is_reported_as_unreachable_not_as_a_kubeconfig_problem(
    tmp_path: Path,
) -> None:
    server = closed_port()
    env = {"KUBECONFIG": str(kubeconfig(tmp_path, server))}
    result = CliRunner().invoke(cli, ["status", str(PROFILE)], env=env)
    assert result.exit_code == 6, result.output
    assert f"cannot reach the API server at {server}" in result.output
    assert "kubeconfig" not in result.output.splitlines()[0]
