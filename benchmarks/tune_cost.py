"""What `tune`'s pruning and early stopping save: time to a schedule against an exhaustive sweep.

Runs `specdeploy tune` twice on the same servers in the same run: as it runs by default (a k above
one that already lost beyond noise at this or a lower load is not measured, and a cell stops after
a round of requests once its interval, at a confidence split over the looks, decides it) and with
`--exhaustive` (every cell, every request), both with the same --requests, so the same error rate
per decision. Prints the wall time, the cells and requests measured by each, their ratio, and
whether both chose the same schedule.

By default the servers are loopback fakes (tests/unit/bench/loopback.py) whose step costs place
a crossover that falls with k (k=1 pays to concurrency ~8, k=8 only at 1), so pruning has
something to skip; `--endpoint-per-k URL --baseline URL --profile FILE` measures your own
servers instead (one per k, e.g. the layered CPU test bed of profiles/local/layered-tune.yaml).

Run: python benchmarks/tune_cost.py [--k 1,2,4,8] [--concurrency 1,4,8] [--requests 24]
The ratio is the result; absolute seconds depend on the machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.unit.bench.loopback import Behaviour, LoopbackServer  # noqa: E402

#: Fake servers: k -> (step seconds alone, growth per extra request in the server).
FAKE_STEPS = {0: (0.010, 0.0), 1: (0.012, 0.08), 2: (0.013, 0.25), 4: (0.015, 0.6), 8: (0.02, 1.5)}


@contextlib.contextmanager
def fake_servers(ks: list[int]) -> Iterator[tuple[str, str]]:
    with socket.socket() as probe:
        probe.bind(("127.0.1.1", 0))
        port = probe.getsockname()[1]
    with contextlib.ExitStack() as stack:
        for k in ks:
            base, growth = FAKE_STEPS.get(k, (0.01 + 0.0015 * k, 0.2 * k))
            behaviour = Behaviour(
                step_delay=lambda a, b=base, g=growth: b * (1 + g * (a - 1)),
                tokens_per_step=k + 1,
                draft_tokens_per_step=k,
            )
            stack.enter_context(LoopbackServer(behaviour, host=f"127.0.1.{k}", port=port))
        baseline = Behaviour(step_delay=lambda a: 0.010)
        server = stack.enter_context(LoopbackServer(baseline))
        yield f"http://127.0.1.{{k}}:{port}", server.url


def tune(profile: Path, template: str, baseline: str, out: Path, args: Any, *extra: str) -> float:
    argv = [
        sys.executable, "-m", "orchestrator", "tune", str(profile), "--endpoint-per-k", template,
        "--baseline", baseline, "--k", args.k, "--concurrency", args.concurrency,
        "--requests", str(args.requests), "--max-tokens", str(args.max_tokens), "--out", str(out),
        "--offline", *extra,
    ]  # fmt: skip
    began = time.perf_counter()
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - began
    if done.returncode != 0:
        sys.exit(f"tune failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", default="1,2,4,8")
    parser.add_argument("--concurrency", default="1,4,8")
    parser.add_argument("--requests", type=int, default=24)
    parser.add_argument("--max-tokens", type=int, default=17)
    parser.add_argument("--endpoint-per-k", default=None)
    parser.add_argument("--baseline", default=None)
    parser.add_argument("--profile", type=Path, default=None)
    args = parser.parse_args()
    ks = [int(k) for k in args.k.split(",")]
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        profile = args.profile or _fake_profile(root)
        servers = (
            contextlib.nullcontext((args.endpoint_per_k, args.baseline))
            if args.endpoint_per_k
            else fake_servers(ks)
        )
        with servers as (template, baseline):
            pruned = tune(profile, template, baseline, root / "pruned", args)
            every = tune(profile, template, baseline, root / "every", args, "--exhaustive")
        documents = {
            name: json.loads((root / name / "tune.json").read_text())
            for name in ("pruned", "every")
        }
    measured = {
        name: sum(1 for c in doc["cells"] if c["outcome"] != "skipped")
        for name, doc in documents.items()
    }
    sent = {
        name: sum(c["ok"] + c["failed"] for c in doc["cells"]) for name, doc in documents.items()
    }
    stopped = sum(1 for c in documents["pruned"]["cells"] if c["note"].startswith("stopped"))
    same = documents["pruned"]["schedule"] == documents["every"]["schedule"]
    print(f"k {args.k} x concurrency {args.concurrency}, {args.requests} requests per arm")
    print(f"exhaustive: {measured['every']} cells, {sent['every']} requests, {every:.1f} s")
    print(
        f"pruned:     {measured['pruned']} cells ({stopped} stopped early), "
        f"{sent['pruned']} requests, {pruned:.1f} s"
    )
    print(f"time to a schedule, pruned / exhaustive: {pruned / every:.2f}x")
    print(f"same schedule: {'yes' if same else 'no'} {documents['pruned']['schedule']}")
    if not same:
        print(f"exhaustive chose {documents['every']['schedule']}")


def _fake_profile(root: Path) -> Path:
    import yaml

    document = yaml.safe_load((REPO / "profiles" / "vllm-qwen3-4b-draft.yaml").read_text())
    document["serving"].update(max_model_len=4096, max_concurrency=32)
    path = root / "profile.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


if __name__ == "__main__":
    main()
