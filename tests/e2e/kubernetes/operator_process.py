"""A `specdeploy operator` process for the e2e suite, as the chart runs it: its own kubeconfig
(the chart's ServiceAccount, from `Cluster.chart_identity`), one watched namespace, offline."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.kube.cluster import Cluster
from tests.operator.test_resource import profile_text
from tests.support import REPO_ROOT

API = "specdeploy.io/v1"
KIND = "SpeculativeDeployment"


class OperatorProcess:
    """Started on construction, with `args` after the chart's and `env` beside the kubeconfig
    (a replica's POD_NAME); `stop` sends SIGTERM (a clean stop, as the kubelet does) or `sig`."""

    def __init__(
        self,
        kubeconfig: Path,
        namespace: str,
        log: Path,
        *args: str,
        env: dict[str, str] | None = None,
        debug: bool = False,
    ) -> None:
        self.log = log
        environment = {
            **os.environ,
            "KUBECONFIG": str(kubeconfig),
            "PYTHONPATH": str(REPO_ROOT),
            "HF_HUB_OFFLINE": "1",
            "NO_PROXY": "*",
            **(env or {}),
        }
        argv = [
            sys.executable, "-m", "orchestrator", *(["--debug"] if debug else []),
            "operator", "--offline", "-n", namespace, *args,
        ]  # fmt: skip
        with log.open("ab") as out:
            self.process = subprocess.Popen(
                argv, env=environment, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def says(self, text: str) -> bool:
        return text in self.output()

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.process.poll() is None:
            os.killpg(self.process.pid, sig)
        try:
            return self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            return self.process.wait()


def create_resource(kube: Cluster, namespace: str, name: str, interval_s: int | None = 1) -> None:
    """A SpeculativeDeployment with both twins and a static policy (nothing to scrape), ticking
    every `interval_s` (None: the policy's default)."""
    every = "" if interval_s is None else f", interval_seconds: {interval_s}"
    policy = f"{{mode: static{every}}}"
    document = yaml.safe_load(profile_text(api=API, policy=policy))
    document["metadata"] = {"name": name, "namespace": namespace}
    kube.apply(document, namespace=namespace)


def resource(kube: Cluster, namespace: str, name: str) -> dict[str, Any] | None:
    return kube.get(API, KIND, name, namespace)


def applied(kube: Cluster, namespace: str, name: str) -> list[dict[str, Any]]:
    """`status.objects.owned` once the operator has planned and applied the resource."""
    found = resource(kube, namespace, name) or {}
    return list(((found.get("status") or {}).get("objects") or {}).get("owned") or [])
