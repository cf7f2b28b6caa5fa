"""The operator's loop on real vLLM 0.32.0 (CPU) servers of the layered test bed.

Two servers are shared by both tests (module scope): the speculative twin (the layered target
with its noisy one-layer draft, k=4) at 127.0.0.2 and the baseline twin at 127.0.0.3, on one
port, as two pods of a cluster would be. The API side is the loopback API server with a real
`specdeploy operator` process; the test plays the kubelet (Pod objects with those IPs) and a
bounded load generator (the bench client) that sends the same requests to both twins in
alternating slices (a mirror of the traffic, time-sliced so that on 2 shared cores each twin is
timed alone, as `specdeploy bench` does), so the operator times both at the current load.

* switch: at concurrency 1 the speculative twin is faster; at 16 it is slower (the test bed's
  crossover sits near 5), so traffic moves to the baseline and back, at most once per dwell.
* retune: the noisy draft is accepted at its deep positions far less often than at the first,
  so retune lowers num_speculative_tokens and rolls the speculative twin with the new value.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from orchestrator.bench.client import Endpoint, Sampling, make_client, request_body, stream_request
from orchestrator.bench.workload import load_workload
from orchestrator.cli import cli
from orchestrator.dev.layered import LayeredModels, make_layered_models
from orchestrator.dev.tiny_models import DEFAULT_DIR
from orchestrator.runner.local import stop
from tests.e2e.servers import VLLM_BIN, VLLM_PYTHON, require_vllm, server_env, wait_healthy
from tests.operator.conftest import CR, Operator, resource, status_of, wait_for
from tests.operator.fake_api import ApiServer, FakeCluster
from tests.operator.test_loop import HOSTS, _free_port_on_both, add_pods, selector
from tests.support import REPO_ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.scenario]

K = 4
MAX_TOKENS = 24
INTERVAL_S, DWELL_S = 6, 12
SLICE_S = 2.0


@pytest.fixture(scope="module")
def twins(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LayeredModels, int]]:
    """Both twins' servers, started together; yields the models and their shared port."""
    require_vllm()
    models = make_layered_models(REPO_ROOT / DEFAULT_DIR, python=str(VLLM_PYTHON))
    port = _free_port_on_both()
    plain = [
        str(models.target),
        "--enforce-eager",
        "--max-model-len",
        "512",
        "--max-num-seqs",
        "16",
        "--port",
        str(port),
    ]
    draft = {"method": "draft_model", "model": str(models.noisy_draft), "num_speculative_tokens": K}
    argv = {
        "speculative": [*plain, "--speculative-config", json.dumps(draft)],
        "baseline": plain,
    }
    with contextlib.ExitStack() as stack:
        processes = {}
        for variant, args in argv.items():
            scratch = tmp_path_factory.mktemp(variant)
            log = stack.enter_context((scratch / "vllm.log").open("wb"))
            processes[variant] = (
                subprocess.Popen(
                    [str(VLLM_BIN), "serve", *args, "--host", HOSTS[variant]],
                    env=server_env(scratch), stdin=subprocess.DEVNULL, stdout=log,
                    stderr=subprocess.STDOUT, start_new_session=True,
                ),
                scratch / "vllm.log",
            )  # fmt: skip
            stack.callback(stop, processes[variant][0], 30)
        for variant, (process, log_path) in processes.items():
            wait_healthy(process, f"http://{HOSTS[variant]}:{port}", log_path, 300)
        yield models, port


def draft_length(api: FakeCluster, name: str) -> int | None:
    """num_speculative_tokens in a twin's rendered --speculative-config (None: not speculative)."""
    deployment = api.get("apis/apps/v1", "deployments", "default", name) or {}
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    tokens = [*container.get("command", []), *container.get("args", [])]
    if "--speculative-config" not in tokens:
        return None
    config = json.loads(tokens[tokens.index("--speculative-config") + 1])
    return int(config["num_speculative_tokens"])


class SlicedLoad:
    """Closed-loop load at a settable concurrency that sends the same requests to both twins in
    alternating slices of about SLICE_S, never both at once (as `specdeploy bench` runs its arms
    one after the other, so that on a shared CPU each twin is timed alone). Bounded: every
    request has a deadline and `close` ends it."""

    def __init__(self, port: int) -> None:
        self.concurrency = 0
        self.sent = 0
        self._stop = threading.Event()
        self._endpoints = [Endpoint(v, f"http://{host}:{port}", "") for v, host in HOSTS.items()]
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(60)

    async def _run(self) -> None:
        items = load_workload("chat").items
        clients = [make_client(e, 16, 60) for e in self._endpoints]
        models = [
            (await c.get(f"{e.api_root}/models")).json()["data"][0]["id"]
            for c, e in zip(clients, self._endpoints, strict=True)
        ]
        arms = [
            (client, Endpoint(e.label, e.base_url, m))
            for client, e, m in zip(clients, self._endpoints, models, strict=True)
        ]

        async def worker(client: Any, endpoint: Endpoint, deadline: float) -> None:
            while time.monotonic() < deadline and not self._stop.is_set():
                item = items[self.sent % len(items)]
                self.sent += 1
                body = request_body(endpoint, item, Sampling(ignore_eos=True), MAX_TOKENS)
                await stream_request(
                    client,
                    endpoint,
                    body,
                    timeout_s=60,
                    stall_s=30,
                    level_start=time.perf_counter(),
                )

        turn = 0
        while not self._stop.is_set():
            if self.concurrency == 0:
                await asyncio.sleep(0.1)
                continue
            client, endpoint = arms[turn % 2]
            turn += 1
            deadline = time.monotonic() + SLICE_S
            # a slice ends when its last request does: the twins never serve at the same time
            await asyncio.gather(
                *(worker(client, endpoint, deadline) for _ in range(self.concurrency))
            )
        for client in clients:
            await client.aclose()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[FakeCluster, Operator]]:
    api = FakeCluster()
    server = ApiServer(api)
    api.url = server.url  # type: ignore[attr-defined]
    operator = Operator(api, tmp_path)
    operator.start()
    yield api, operator
    operator.stop()
    server.close()


def layered_resource(
    models: LayeredModels, port: int, policy: dict[str, Any], name: str
) -> dict[str, Any]:
    """The test bed as a resource; its models resolve from the operator's user catalog."""
    for path, ref in (
        (models.target, "specdeploy-dev/layered-target"),
        (models.noisy_draft, "specdeploy-dev/layered-noisy-draft"),
    ):
        result = CliRunner().invoke(cli, ["catalog", "add", str(path), "--as", ref])
        assert result.exit_code == 0, result.output
    return resource(
        metadata={"name": name},
        target={"model": "specdeploy-dev/layered-target", "revision": "test-bed"},
        proposer={
            "method": "draft_model",
            "model": "specdeploy-dev/layered-noisy-draft",
            "revision": "test-bed",
            "num_speculative_tokens": K,
        },
        hardware={"device": "cpu", "gpu": None},
        serving={
            "max_model_len": 512,
            "max_concurrency": 16,
            "gpu_memory_fraction": 0.15,
            "port": port,
        },
        vllm={"enforce_eager": True},
        policy=policy,
    )


def test_switch_follows_the_crossover_without_flapping(
    twins: tuple[LayeredModels, int], cluster: tuple[FakeCluster, Operator]
) -> None:
    models, port = twins
    api, operator = cluster
    policy = {
        "mode": "switch",
        "interval_seconds": INTERVAL_S,
        "dwell_seconds": DWELL_S,
        "hysteresis": 0.1,
        "smoothing": 0.7,
        "min_requests": 2,
    }
    api.put(*CR, layered_resource(models, port, policy, "qwen3-8b-ngram"))
    wait_for("the twins", lambda: len(api.list("apis/apps/v1", "deployments")) == 2, operator)
    add_pods(api)
    history: list[tuple[float, str | None]] = []
    seen_decisions: dict[float, str] = {}  # every interval's decision, for the failure message
    load = SlicedLoad(port)
    try:
        for concurrency, seconds in ((1, 14), (16, 30), (1, 30)):
            load.concurrency = concurrency
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                history.append((time.monotonic(), selector(api)))
                last = status_of(api).get("lastDecision") or {}
                if last:
                    seen_decisions[last["at"]] = (
                        f"c={concurrency} {last['reason']}: {last['message']}"
                    )
                time.sleep(0.5)
    finally:
        load.close()
    decisions = status_of(api).get("decisions") or []
    summary: list[Any] = [*seen_decisions.values()]
    summary += [
        (
            d["reason"],
            d["evidence"]["load"],
            d["evidence"].get("tpotRatio"),
        )
        for d in decisions
    ]
    print("decisions:", json.dumps(decisions, indent=1))  # shown with -s: the measured figures
    switches = [d for d in decisions if d["action"] == "switch"]
    print("every interval:", "\n".join(map(str, summary)))
    assert [d["active"] for d in switches][:2] == ["baseline", "speculative"], "\n".join(
        map(str, summary)
    )
    to_baseline, back = switches[0], switches[1]
    for decision in (to_baseline, back):  # the figures behind each switch are in status
        evidence = decision["evidence"]
        assert evidence["speculative"]["smoothedTpotMs"] and evidence["baseline"]["smoothedTpotMs"]
        assert (
            evidence["acceptanceLength"] is not None and 1.0 < evidence["acceptanceLength"] < K + 1
        )
    assert (
        to_baseline["evidence"]["speculative"]["smoothedTpotMs"]
        > to_baseline["evidence"]["baseline"]["smoothedTpotMs"]
    )
    assert (
        back["evidence"]["speculative"]["smoothedTpotMs"]
        < back["evidence"]["baseline"]["smoothedTpotMs"]
    )
    times = [d["at"] for d in switches]
    assert all(b - a >= DWELL_S for a, b in itertools.pairwise(times)), summary
    seen = [active for _, active in history]
    assert seen[0] == "speculative" and "baseline" in seen and seen[-1] == "speculative"


def test_retune_lowers_the_draft_length_the_deep_positions_do_not_earn(
    twins: tuple[LayeredModels, int], cluster: tuple[FakeCluster, Operator]
) -> None:
    """The noisy draft's deeper positions are accepted less often than its first. The operator
    measures that (status.acceptance.perPosition); with lower_below set between the first and
    the deepest position's share, retune keeps the positions above it and rolls the twin."""
    models, port = twins
    api, operator = cluster
    policy: dict[str, Any] = {
        "mode": "retune",
        "interval_seconds": INTERVAL_S,
        "dwell_seconds": DWELL_S,
        "smoothing": 0.5,
        "retune": {"lower_below": 0.01, "raise_above": 0.999},  # measure first, change nothing
    }
    name = "qwen3-8b-ngram"
    document = layered_resource(models, port, policy, name)
    api.put(*CR, document)
    wait_for("the twins", lambda: len(api.list("apis/apps/v1", "deployments")) == 2, operator)
    add_pods(api)
    load = SlicedLoad(port)
    load.concurrency = 2
    try:
        measured = wait_for(
            "per-position acceptance",
            lambda: (
                len(p := (status_of(api).get("acceptance") or {}).get("perPosition") or []) == K
                and p
            ),
            operator,
        )
        assert measured[0] > measured[-1]  # deep positions are accepted less often
        threshold = round((measured[0] + measured[-1]) / 2, 3)
        document["policy"]["retune"]["lower_below"] = threshold
        api.put(*CR, document)
        decision = wait_for(
            "a retune",
            lambda: next(
                (d for d in status_of(api).get("decisions") or [] if d["action"] == "retune"), None
            ),
            operator,
            timeout=60,
        )
    finally:
        load.close()
    print("retune:", json.dumps(decision))  # shown with -s: the measured figures
    positions = decision["evidence"]["perPosition"]
    kept = decision["numSpeculativeTokens"]
    assert 1 <= kept < K and positions[kept] < threshold
    assert all(p >= threshold for p in positions[:kept])
    assert f"lower_below={threshold}" in decision["message"]
    wait_for("the rolled speculative twin", lambda: draft_length(api, name) == kept, operator)
    assert draft_length(api, f"{name}-baseline") is None  # the baseline twin is left as it was
    assert [e for e in api.list("api/v1", "events") if e.get("reason") == "Retuned"]
