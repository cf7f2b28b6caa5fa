"""The operator at many resources: N SpeculativeDeployments (1,000 by default) against the
Kubernetes API imitation of the e2e suite (tests/kube: server-side apply, RBAC, watches, and its
controllers: Deployments, ReplicaSets, a scheduler over GPU nodes, kubelets making Pods Ready),
the operator running as the chart's ServiceAccount with the chart's Role, compared in the same run
with a plain kopf operator that watches the same resources and does nothing
(benchmarks/null_operator.py).

Prints, for each: the time until every resource was handled (the operator: `status.verdict` set
and both twins' Deployments applied; the plain one: its progress annotation on every resource),
then CPU (share of one core) and peak RSS over a steady window after that, and the ratios.

Run: python benchmarks/operator_scale.py [--resources 1000] [--window 60] [--deadline 1800]
     [--interval 30]
Absolute seconds depend on the machine, and part of them is the imitation's (a Python server in
this process); the ratios against the plain kopf operator are the result.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from orchestrator.operator.crd import custom_resource_definition  # noqa: E402
from tests.kube.cluster import Cluster  # noqa: E402
from tests.kube.controllers import node_body  # noqa: E402
from tests.kube.server import Imitation  # noqa: E402

API = "specdeploy.io/v1"
GROUP_PLURAL = ("specdeploy.io", "speculativedeployments")
PROFILE = """\
apiVersion: specdeploy.io/v1
kind: SpeculativeDeployment
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  engine: {{name: vllm, version: "0.32.0"}}
  target: {{model: Qwen/Qwen3-8B, revision: b968826d9c46dd6066d109eabc6255188de91218}}
  proposer: {{method: ngram, num_speculative_tokens: 4}}
  hardware: {{gpu: L40S}}
  serving: {{max_model_len: 8192, max_concurrency: 8}}
  deploy: {{baseline: true}}
  policy: {{mode: static, interval_seconds: {interval}}}
"""
GPUS_PER_NODE = 8


@dataclass
class Measured:
    name: str
    handled_s: float | None
    """Seconds until every resource was handled; None past the deadline."""
    handled: int
    cpu_share: float
    """CPU seconds per wall second over the steady window (1.0: one core busy)."""
    peak_rss_mib: float


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resources", type=int, default=1000)
    parser.add_argument("--window", type=float, default=60.0, help="steady window, seconds")
    parser.add_argument("--deadline", type=float, default=1800.0, help="seconds to handle all")
    parser.add_argument(
        "--interval", type=int, default=30, help="each resource's policy.interval_seconds"
    )
    args = parser.parse_args()
    results = []
    for name, start, handled in (
        ("plain kopf (does nothing)", start_null, annotated),
        ("specdeploy operator", start_operator, planned_and_applied),
    ):
        with tempfile.TemporaryDirectory() as scratch, imitation(args.resources) as imitated:
            cluster = Cluster(Path(scratch), imitated)
            namespace = prepare(cluster, args.resources, args.interval)
            kubeconfig = cluster.chart_identity(namespace)
            print(f"{name}: {args.resources} resources in {namespace} ...", flush=True)
            with start(kubeconfig, namespace, Path(scratch)) as process:
                count = functools.partial(handled, imitated, namespace)
                results.append(measure(name, process, count, args))
    report(results, args.resources)


@contextlib.contextmanager
def imitation(resources: int) -> Iterator[Imitation]:
    """The imitation with enough L40S nodes for both twins of every resource."""
    count = -(-2 * resources // GPUS_PER_NODE)
    nodes = tuple(
        node_body(
            f"gpu-{i:04d}",
            gpus=GPUS_PER_NODE,
            labels={"nvidia.com/gpu.product": "NVIDIA-L40S"},
        )
        for i in range(count)
    )
    served = Imitation(nodes=nodes).serve()
    try:
        yield served
    finally:
        served.close()


def prepare(cluster: Cluster, resources: int, interval: int) -> str:
    cluster.install_crd_documents([custom_resource_definition()])
    namespace = cluster.namespace("scale")
    for i in range(resources):
        cluster.apply(
            yaml.safe_load(
                PROFILE.format(name=f"tenant-{i:04d}", namespace=namespace, interval=interval)
            ),
            namespace=namespace,
        )
    return namespace


def _env(kubeconfig: Path) -> dict[str, str]:
    return {
        **os.environ,
        "KUBECONFIG": str(kubeconfig),
        "PYTHONPATH": str(REPO),
        "HF_HUB_OFFLINE": "1",
        "NO_PROXY": "*",
    }


@contextlib.contextmanager
def _child(argv: list[str], kubeconfig: Path, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        process = subprocess.Popen(
            argv, env=_env(kubeconfig), stdout=out, stderr=subprocess.STDOUT, cwd=REPO
        )
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.returncode not in (0, -15):
            print(f"  (exit {process.returncode}; log {log}):", flush=True)
            print("  " + "\n  ".join(log.read_text(errors="replace").splitlines()[-15:]))


def start_operator(
    kubeconfig: Path, namespace: str, scratch: Path
) -> contextlib.AbstractContextManager[subprocess.Popen[bytes]]:
    argv = [sys.executable, "-m", "orchestrator", "operator", "--offline", "-n", namespace]
    return _child(argv, kubeconfig, scratch / "operator.log")


def start_null(
    kubeconfig: Path, namespace: str, scratch: Path
) -> contextlib.AbstractContextManager[subprocess.Popen[bytes]]:
    script = str(REPO / "benchmarks" / "null_operator.py")
    argv = [sys.executable, "-m", "kopf", "run", "--standalone", "-n", namespace, script]
    return _child(argv, kubeconfig, scratch / "null-operator.log")


def _resources(imitated: Imitation, namespace: str) -> list[dict[str, Any]]:
    return [
        obj
        for key, obj in imitated.view().items()  # no copies: this runs every second
        if (key[0], key[1]) == GROUP_PLURAL and key[2] == namespace
    ]


def planned_and_applied(imitated: Imitation, namespace: str) -> int:
    deployments = {
        key[3] for key in imitated.view() if key[:3] == ("apps", "deployments", namespace)
    }
    done = 0
    for obj in _resources(imitated, namespace):
        name = obj["metadata"]["name"]
        verdict = (obj.get("status") or {}).get("verdict")
        if verdict and name in deployments and f"{name}-baseline" in deployments:
            done += 1
    return done


def annotated(imitated: Imitation, namespace: str) -> int:
    """Resources whose create handler kopf has run (its last-handled annotation is there)."""
    return sum(
        1
        for obj in _resources(imitated, namespace)
        if "kopf.zalando.org/last-handled-configuration"
        in ((obj.get("metadata") or {}).get("annotations") or {})
    )


def measure(
    name: str, process: subprocess.Popen[bytes], handled: Callable[[], int], args: Any
) -> Measured:
    began = time.monotonic()
    done = 0
    said = began
    while time.monotonic() - began < args.deadline and process.poll() is None:
        done = handled()
        if done >= args.resources:
            break
        if time.monotonic() - said >= 30:
            said = time.monotonic()
            print(f"  {done}/{args.resources} after {said - began:.0f} s", flush=True)
        time.sleep(1.0)
    elapsed = time.monotonic() - began if done >= args.resources else None
    shown = f"{elapsed:.1f} s" if elapsed is not None else f"not within {args.deadline:.0f} s"
    print(f"  {done}/{args.resources} handled: {shown}", flush=True)
    cpu_before, wall_before = _cpu_s(process.pid), time.monotonic()
    peak = 0.0
    while time.monotonic() - wall_before < args.window and process.poll() is None:
        peak = max(peak, _rss_mib(process.pid))
        time.sleep(1.0)
    share = (_cpu_s(process.pid) - cpu_before) / max(time.monotonic() - wall_before, 1e-9)
    print(f"  steady {args.window:.0f} s: CPU {share:.3f} of a core, peak RSS {peak:.0f} MiB")
    return Measured(name, elapsed, done, share, peak)


def _cpu_s(pid: int) -> float:
    with contextlib.suppress(OSError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return 0.0


def _rss_mib(pid: int) -> float:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def report(results: list[Measured], resources: int) -> None:
    null, ours = results
    print(f"\n{resources} resources | handled in | steady CPU (cores) | peak RSS (MiB)")
    for m in results:
        handled = f"{m.handled_s:.1f} s" if m.handled_s is not None else f"{m.handled} only"
        print(f"{m.name} | {handled} | {m.cpu_share:.3f} | {m.peak_rss_mib:.0f}")
    if null.handled_s and ours.handled_s:
        print(
            f"time to all handled, specdeploy / plain kopf: {ours.handled_s / null.handled_s:.2f}x"
        )
    if null.cpu_share > 0:
        print(f"steady CPU, specdeploy / plain kopf: {ours.cpu_share / null.cpu_share:.2f}x")
    if null.peak_rss_mib > 0:
        print(f"peak RSS, specdeploy / plain kopf: {ours.peak_rss_mib / null.peak_rss_mib:.2f}x")


if __name__ == "__main__":
    main()
