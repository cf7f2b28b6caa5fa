"""`specdeploy tune --cluster`: each arm applied to the cluster as its own deployment, measured
through the API server's service proxy once ready, and deleted before the next.

The API server is the loopback imitation the operator tests use (tests/operator/fake_api.py),
whose service proxy is imitated from kube-apiserver v1.36.0's (`ProxyREST.Connect` and
`ResolveEndpoint`; see that module). No control plane runs here, so this test plays the kubelet
and the Deployment controller (`Kubelet`): for each Deployment tune applies it reads the rendered
container command, starts the bench tests' loopback OpenAI server with the step costs of that
command's k on its own loopback address, at the container port, reports a ready Pod there and the
Deployment's readyReplicas, and stops it all when the Deployment is deleted. So the apply, the
readiness wait, the proxy URL and credentials, the one-at-a-time order and the cleanup are
tune's own; the engine is scripted. The opt-in real-cluster run is
`tests/e2e/test_cluster.py::test_tune_cluster_measures_through_the_service_proxy`.
"""

from __future__ import annotations

import _thread
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from orchestrator.cli import cli
from tests.operator.fake_api import ApiServer, FakeCluster, kubeconfig_text
from tests.unit.bench.loopback import Behaviour, LoopbackServer

NAMESPACE = "llm"
"""The profile's metadata.namespace: it wins over the kube context's (`default` here)."""
DEPLOYMENTS = ("apis/apps/v1", "deployments")
#: k -> (step seconds up to that many requests in the server, that many, step seconds above), as
#: in test_tune_local: k=1 1.7x at both loads; k=3 2.5x alone, a full verifier from 2 on.
STEPS = {0: (0.020, 99, 0.020), 1: (0.024, 99, 0.024), 3: (0.032, 1, 0.140)}


@dataclass
class Kubelet:
    """The kubelet and the Deployment controller for the arms tune applies (see the module)."""

    api: FakeCluster
    never_ready: frozenset[int] = frozenset()
    """Draft lengths whose pod never gets ready (an image that never pulls)."""
    interrupt_at: int | None = None
    """Press Ctrl-C in tune (SIGINT to the main thread) once this k's Deployment appears."""
    started: list[tuple[str, int]] = field(default_factory=list)
    running: dict[str, LoopbackServer | None] = field(default_factory=dict)
    most_at_once: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        for name in list(self.running):
            self._stopped(name)

    def _loop(self) -> None:
        while not self._stop.wait(0.05):
            current = {d["metadata"]["name"]: d for d in self.api.list(*DEPLOYMENTS, NAMESPACE)}
            for name, deployment in current.items():
                if name not in self.running:
                    self._start(name, deployment)
            for name in set(self.running) - set(current):
                self._stopped(name)
            self.most_at_once = max(self.most_at_once, len(self.running))

    def _start(self, name: str, deployment: dict[str, Any]) -> None:
        template = deployment["spec"]["template"]
        container = template["spec"]["containers"][0]
        argv = [*container.get("command", []), *container.get("args", [])]
        k = 0
        if "--speculative-config" in argv:
            config = json.loads(argv[argv.index("--speculative-config") + 1])
            k = int(config["num_speculative_tokens"])
        self.started.append((name, k))
        if k == self.interrupt_at:
            _thread.interrupt_main()
        if k in self.never_ready:
            self.running[name] = None
            return
        port = next(p["containerPort"] for p in container["ports"] if p["name"] == "http")
        host = f"127.0.3.{len(self.started)}"
        low, up_to, high = STEPS[k]
        behaviour = Behaviour(
            model=argv[argv.index("--served-model-name") + 1],
            step_delay=lambda active: low if active <= up_to else high,
            tokens_per_step=k + 1,
            draft_tokens_per_step=k,
        )
        server = LoopbackServer(behaviour, host=host, port=port).__enter__()
        self.running[name] = server
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{name}-0",
                "namespace": NAMESPACE,
                "labels": template["metadata"]["labels"],
            },
            "spec": template["spec"],
            "status": {
                "podIP": host,
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
        self.api.put("api/v1", "pods", pod, manager="kubelet")
        replicas = deployment["spec"].get("replicas", 1)
        ready = {"replicas": replicas, "readyReplicas": replicas, "availableReplicas": replicas}
        self.api.set_status(*DEPLOYMENTS, NAMESPACE, name, ready)

    def _stopped(self, name: str) -> None:
        server = self.running.pop(name)
        if server is not None:
            server.__exit__(None, None, None)
            if self.api.get("api/v1", "pods", NAMESPACE, f"{name}-0") is not None:
                self.api.delete("api/v1", "pods", NAMESPACE, f"{name}-0")


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCluster]:
    api = FakeCluster()
    server = ApiServer(api)
    config = tmp_path / "kubeconfig"
    config.write_text(kubeconfig_text(server.url))
    monkeypatch.setenv("KUBECONFIG", str(config))
    yield api
    server.close()


def tune_cluster(profile: Path, out: Path, *extra: str) -> tuple[int, str]:
    result = CliRunner().invoke(
        cli,
        [
            "tune", str(profile), "--cluster", "--engine-timeout", "20", "--k", "1,3",
            "--concurrency", "1,4", "--requests", "8", "--max-tokens", "13", "--out", str(out),
            "--offline", *extra,
        ],
    )  # fmt: skip
    return result.exit_code, result.output


def tune_with(kubelet: Kubelet, profile: Path, out: Path, *extra: str) -> tuple[int, str]:
    """tune --cluster while `kubelet` plays the nodes; it stops when tune does."""
    try:
        return tune_cluster(profile, out, *extra)
    finally:
        time.sleep(0.2)  # the kubelet notices the last deletion
        kubelet.close()


def test_each_arm_is_applied_alone_measured_through_the_proxy_and_deleted(
    profile: Path, cluster: FakeCluster, tmp_path: Path
) -> None:
    kubelet = Kubelet(cluster)
    code, output = tune_with(kubelet, profile, tmp_path / "tune")
    assert code == 0, output
    arms = [name for name, _ in kubelet.started]
    assert arms == [
        "qwen3-4b-draft-tune-baseline",
        "qwen3-4b-draft-tune-k1",
        "qwen3-4b-draft-tune-k3",
    ]
    assert [k for _, k in kubelet.started] == [0, 1, 3]
    assert kubelet.most_at_once == 1  # one arm at a time, as one GPU's worth of nodes holds
    # nothing is left on the cluster: every arm's Service and Deployment were deleted
    assert cluster.list(*DEPLOYMENTS, NAMESPACE) == []
    assert cluster.list("api/v1", "services", NAMESPACE) == []
    # every request went through the API server's service proxy, with the kubeconfig's token
    paths = {path.split("/proxy")[-1] for _, path, _ in cluster.proxied}
    assert {"/v1/models", "/v1/completions", "/metrics"} <= paths
    assert {auth for _, _, auth in cluster.proxied} == {"Bearer fake-token"}
    prefixes = {path.split("/proxy")[0] for _, path, _ in cluster.proxied}
    assert prefixes == {f"/api/v1/namespaces/{NAMESPACE}/services/{arm}:http" for arm in arms}
    document = json.loads((tmp_path / "tune" / "tune.json").read_text())
    assert [(c["concurrency"], c["k"]) for c in document["choices"]] == [(1, 3), (4, 1)]
    assert document["config"]["baseline"].startswith("cluster: one deployment at a time")
    assert f"namespace {NAMESPACE}" in document["config"]["baseline"]
    text = (tmp_path / "tune" / "tune.json").read_text() + output
    assert "fake-token" not in text  # the token is sent, never written


def test_an_arm_that_never_gets_ready_is_deleted_and_the_finished_cells_kept(
    profile: Path, cluster: FakeCluster, tmp_path: Path
) -> None:
    kubelet = Kubelet(cluster, never_ready=frozenset({3}))
    code, output = tune_with(kubelet, profile, tmp_path / "tune", "--engine-timeout", "3")
    assert code == 6, output
    assert "qwen3-4b-draft-tune-k3 is not ready after 3 s" in output
    assert "Traceback" not in output
    assert cluster.list(*DEPLOYMENTS, NAMESPACE) == []  # its objects were deleted all the same
    kept = json.loads((tmp_path / "tune" / "tune.json").read_text())["cells"]
    assert {(c["k"], c["concurrency"]) for c in kept} == {(1, 1), (1, 4)}


def test_ctrl_c_while_an_arm_starts_deletes_it_and_keeps_every_finished_cell(
    profile: Path, cluster: FakeCluster, tmp_path: Path
) -> None:
    kubelet = Kubelet(cluster, interrupt_at=3)
    code, output = tune_with(kubelet, profile, tmp_path / "tune")
    assert code == 130, output
    assert cluster.list(*DEPLOYMENTS, NAMESPACE) == []
    assert cluster.list("api/v1", "services", NAMESPACE) == []
    kept = json.loads((tmp_path / "tune" / "tune.json").read_text())["cells"]
    assert {(c["k"], c["concurrency"]) for c in kept} == {(1, 1), (1, 4)}
    # run again: only the missing cells are measured, and only their arm is applied
    again = Kubelet(cluster)
    code, output = tune_with(again, profile, tmp_path / "tune")
    assert code == 0, output
    assert [name for name, _ in again.started] == [
        "qwen3-4b-draft-tune-baseline",
        "qwen3-4b-draft-tune-k3",
    ]


def test_an_unreachable_cluster_is_exit_6_before_anything_is_measured(
    profile: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(kubeconfig_text("http://127.0.0.1:9"))
    monkeypatch.setenv("KUBECONFIG", str(config))
    code, output = tune_cluster(profile, tmp_path / "tune", "--engine-timeout", "3")
    assert code == 6, output
    assert "Traceback" not in output and "127.0.0.1:9" in output
