"""Fixtures: the loopback API server, a real `specdeploy operator` process against it, and
helpers that act as the rest of a cluster would (kubelet pods, kubectl, the twins' /metrics)."""

from __future__ import annotations

import copy
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.operator.crd import as_resource
from orchestrator.runner.local import stop
from tests.operator.fake_api import ApiServer, FakeCluster, kubeconfig_text
from tests.support import REPO_ROOT

CR = ("apis/specdeploy.io/v1", "speculativedeployments")
NAME = "qwen3-8b-ngram"
TICK_S = 0.25
HOSTS = {"speculative": "127.0.0.2", "baseline": "127.0.0.3"}


def resource(**overrides: Any) -> dict[str, Any]:
    """The ngram example profile as a resource (its model resolves from the built-in catalog),
    with a baseline twin; `overrides` replace blocks of its spec."""
    doc = yaml.safe_load((REPO_ROOT / "profiles" / "vllm-qwen3-8b-ngram.yaml").read_text())
    doc["deploy"] = {"baseline": True}
    doc.update(copy.deepcopy(overrides))
    return as_resource(doc)


@pytest.fixture
def api() -> Iterator[FakeCluster]:
    cluster = FakeCluster()
    server = ApiServer(cluster)
    cluster.url = server.url  # type: ignore[attr-defined]
    yield cluster
    server.close()


class Operator:
    """`specdeploy operator` as a child process, with its log."""

    def __init__(self, api: FakeCluster, tmp_path: Path) -> None:
        self.kubeconfig = tmp_path / "kubeconfig"
        self.kubeconfig.write_text(kubeconfig_text(api.url))  # type: ignore[attr-defined]
        self.log = tmp_path / "operator.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, *args: str, debug: bool = True) -> None:
        env = {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "PYTHONPATH": str(REPO_ROOT),
            "HF_HUB_OFFLINE": "1",
            "NO_PROXY": "*",
        }
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "orchestrator",
                    *(["--debug"] if debug else []),
                    "operator",
                    "--offline",
                    *args,
                ],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        if self.process is not None:
            stop(self.process, 15)  # type: ignore[arg-type]
            self.process = None

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture
def operator(api: FakeCluster, tmp_path: Path) -> Iterator[Operator]:
    running = Operator(api, tmp_path)
    running.start()
    yield running
    running.stop()


def wait_for(
    what: str, check: Callable[[], Any], operator: Operator | None = None, timeout: float = 60.0
) -> Any:
    """Poll `check` until it returns something truthy; fail with the operator's log tail."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        if operator is not None and not operator.alive():
            break
        time.sleep(0.2)
    tail = "\n".join(operator.output().splitlines()[-40:]) if operator is not None else ""
    pytest.fail(f"timed out waiting for {what}\n{tail}")


def status_of(api: FakeCluster, name: str = NAME) -> dict[str, Any]:
    found = api.get(*CR, "default", name)
    return (found or {}).get("status") or {}


def condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in status.get("conditions") or [] if c["type"] == kind), {})


def events(api: FakeCluster, reason: str) -> list[dict[str, Any]]:
    return [e for e in api.list("api/v1", "events") if e.get("reason") == reason]


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    binary = REPO_ROOT / ".ci" / "bin" / "helm"
    if not binary.exists():
        pytest.skip("helm is not installed (.ci/install-k8s-tools.sh)")
    home = tmp_path_factory.mktemp("helm-home")
    with pytest.MonkeyPatch.context() as patch:
        for var in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"):
            patch.setenv(var, str(home / var.lower()))
        yield [str(binary)]


def helm_run(helm: list[str], *args: str) -> str:
    import subprocess

    done = subprocess.run([*helm, *args], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


class ScriptedTwin:
    """A /metrics endpoint whose vLLM counters grow like a server at the scripted request time
    per output token (end-to-end latency over output tokens) and load."""

    def __init__(self, host: str, port: int) -> None:
        self.per_token_s, self.load = 0.02, 1.0
        self.paused = False
        """No traffic reaches it (it finishes nothing), as a twin no request is routed to."""
        self.counters: dict[str, float] = {}
        twin = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = twin.exposition().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer((host, port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def exposition(self) -> str:
        return "".join(f"{name} {value}\n" for name, value in sorted(self.counters.items()))

    def advance(self) -> None:
        """One tick of steady traffic: a request finishes, `load` requests were in the server,
        and its output tokens took `per_token_s` each end to end."""
        if self.paused:
            self.counters.setdefault("vllm:num_requests_running", 0.0)
            return
        for name, value in (
            ("vllm:request_time_per_output_token_seconds_sum", self.per_token_s),
            ("vllm:request_time_per_output_token_seconds_count", 1),
            ("vllm:e2e_request_latency_seconds_sum", self.load * TICK_S),
            ("vllm:e2e_request_latency_seconds_count", 1),
            ("vllm:request_generation_tokens_sum", self.load * TICK_S / self.per_token_s),
            ("vllm:request_generation_tokens_count", 1),
        ):
            self.counters[name] = self.counters.get(name, 0.0) + value
        self.counters["vllm:num_requests_running"] = self.load


@pytest.fixture
def twins() -> Iterator[dict[str, ScriptedTwin]]:
    port = free_port_on_both()
    scripted = {variant: ScriptedTwin(host, port) for variant, host in HOSTS.items()}
    stop = threading.Event()

    def traffic() -> None:
        while not stop.wait(TICK_S):
            for twin in scripted.values():
                twin.advance()

    threading.Thread(target=traffic, daemon=True).start()
    yield scripted
    stop.set()
    for twin in scripted.values():
        twin.server.shutdown()


def add_pods(api: FakeCluster) -> None:
    """What the kubelet would report for the twins' pods: ready, at their loopback addresses."""
    for variant, host in HOSTS.items():
        name = NAME if variant == "speculative" else f"{NAME}-baseline"
        labels = {
            "specdeploy.io/profile": NAME,
            "specdeploy.io/variant": variant,
            "app.kubernetes.io/instance": name,
        }
        api.put(
            "api/v1",
            "pods",
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"{name}-0", "labels": labels},
                "spec": {"containers": [{"name": "engine", "image": "vllm"}]},
                "status": {
                    "podIP": host,
                    "phase": "Running",
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            },
            manager="kubelet",
        )


def free_port_on_both() -> int:
    for _ in range(20):
        with socket.socket() as probe:
            probe.bind(("127.0.0.2", 0))
            port: int = probe.getsockname()[1]
        with socket.socket() as other:
            try:
                other.bind(("127.0.0.3", port))
            except OSError:
                continue
        return port
    raise RuntimeError("no port free on both 127.0.0.2 and 127.0.0.3")
