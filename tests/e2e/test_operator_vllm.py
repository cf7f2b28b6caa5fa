"""The operator's loop on real vLLM 0.32.0 (CPU) servers of the layered test bed.

Two servers are shared by both tests (module scope): the speculative twin (the layered target
with its noisy one-layer draft, k=8) at 127.0.0.2 and the baseline twin at 127.0.0.3, on one
port, as two pods of a cluster would be. The API side is the loopback API server with a real
`specdeploy operator` process; the test plays the kubelet (Pod objects with those IPs) and a
bounded load generator (the bench client) that sends the same requests to both twins in
alternating slices (a mirror of the traffic, time-sliced so that on 2 shared cores each twin is
timed alone, as `specdeploy bench` does), so the operator times both at the current load.

* switch: at concurrency 1 the speculative twin is faster; at 12 it is slower, so traffic moves
  to the baseline and back, once each, at least a dwell apart, and stays where it went while the
  load does. Both twins schedule at most 64 tokens a step (`--max-num-batched-tokens`, as a
  GPU's compute bounds a step): a sequence verifying k=8 drafts takes k + 1 of them and one more
  for the draft model's input (vLLM 0.32.0's `max_num_new_slots_for_drafting`), so the
  speculative twin runs 6 of the 12 sequences at once while the other 6 wait, and the baseline
  runs all 12. (48 tokens were tried too: the speculative twin was then no faster even at
  concurrency 1, 0.38x and 0.88x in two runs on a 2-core EPYC.) The operator compares request time per output token (end-to-end latency over
  output tokens), which counts that wait; the engine's TPOT, which starts at the first token,
  would call the speculative twin faster. Where the CPU still has no crossover (measured first,
  `high_load_ratio`), the test skips, saying what it measured.
* retune: the noisy draft is accepted at its deep positions far less often than at the first,
  so retune lowers num_speculative_tokens and rolls the speculative twin with the new value.
* failover: the speculative twin's vLLM stops answering (its API server process is stopped with
  SIGSTOP, as a hung engine looks to a scraper) while its pod is still reported Ready: within
  one interval traffic moves to the baseline twin with a Warning Event, whatever the dwell; once
  it answers again the operator says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from orchestrator.bench.client import (
    Endpoint,
    Sampling,
    make_client,
    request_body,
    resolve_model,
    stream_request,
)
from orchestrator.bench.metrics import parse_prometheus
from orchestrator.bench.workload import load_workload
from orchestrator.cli import cli
from orchestrator.dev.layered import DRAFT_LENGTH, LayeredModels, make_layered_models
from orchestrator.dev.tiny_models import DEFAULT_DIR
from orchestrator.engines import ENGINES
from orchestrator.engines.metrics import Samples
from orchestrator.operator.loop import SCRAPE_DEADLINE_S
from orchestrator.runner.local import stop
from tests.e2e.servers import VLLM_BIN, VLLM_PYTHON, require_vllm, server_env, wait_healthy
from tests.operator.conftest import (
    CR,
    HOSTS,
    Operator,
    add_pods,
    events,
    free_port_on_both,
    resource,
    status_of,
    wait_for,
)
from tests.operator.fake_api import ApiServer, FakeCluster
from tests.operator.test_loop import selector
from tests.support import REPO_ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.scenario]

K = DRAFT_LENGTH
MAX_TOKENS = 24
INTERVAL_S, DWELL_S = 6, 12
SLICE_S = 1.0
LOW, HIGH = 1, 12
STEP_TOKENS = 64
"""Both twins' step budget (`--max-num-batched-tokens`, `vllm.max_num_batched_tokens`)."""
"""Concurrency below and above the crossover. Each twin serves about half the time, so at HIGH
the operator sees 5-12 requests in the server (load levels "5-8", "9-16"), at LOW under one."""


#: Each twin's vLLM process (its API server), for the failover test to stop and resume.
SERVERS: dict[str, subprocess.Popen[bytes]] = {}


@pytest.fixture(scope="module")
def twins(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LayeredModels, int]]:
    """Both twins' servers, started together; yields the models and their shared port."""
    require_vllm()
    models = make_layered_models(REPO_ROOT / DEFAULT_DIR, python=str(VLLM_PYTHON))
    port = free_port_on_both()
    plain = [
        str(models.target),
        "--enforce-eager",
        "--max-model-len",
        "512",
        "--max-num-seqs",
        "16",
        "--max-num-batched-tokens",
        str(STEP_TOKENS),
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
            SERVERS[variant] = processes[variant][0]
        for variant, (process, log_path) in processes.items():
            wait_healthy(process, f"http://{HOSTS[variant]}:{port}", log_path, 300)
        warm_up(port)
        yield models, port


@pytest.fixture(scope="module")
def high_load_ratio(twins: tuple[LayeredModels, int]) -> float:
    """Baseline over speculative request time per output token at HIGH, from vLLM's own
    /metrics, measured before any operator runs: below 1 the speculative twin is slower there."""
    _, port = twins
    per_token = request_time_per_output_token(port, HIGH, 3 * INTERVAL_S)
    return per_token["baseline"] / per_token["speculative"]


@pytest.fixture(scope="module")
def low_load_ratio(twins: tuple[LayeredModels, int]) -> float:
    """The same at LOW: above 1 the speculative twin is faster there, as the test needs."""
    _, port = twins
    per_token = request_time_per_output_token(port, LOW, 3 * INTERVAL_S)
    return per_token["baseline"] / per_token["speculative"]


def request_time_per_output_token(port: int, concurrency: int, seconds: float) -> dict[str, float]:
    """Each twin's request time per output token (what the operator compares) over `seconds` of
    SlicedLoad at `concurrency`."""

    def scrape() -> dict[str, Samples]:
        return {
            variant: parse_prometheus(
                httpx.get(f"http://{host}:{port}/metrics", timeout=10, trust_env=False).text,
                by_label="position",
            )
            for variant, host in HOSTS.items()
        }

    before = scrape()
    load = SlicedLoad(port)
    try:
        load.concurrency = concurrency
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            load.check()
            time.sleep(0.5)
    finally:
        load.close()
    after = scrape()
    found = {}
    for variant in HOSTS:
        window = ENGINES["vllm"].metrics.serving(before[variant], after[variant])
        measured = None if window is None else window.seconds_per_token
        assert measured, f"{variant}: no requests timed: {window}"
        found[variant] = measured
    return found


def warm_up(port: int) -> None:
    """A few rounds on both twins, at both loads, before anything is measured: a twin that does
    not serve fails here with its error, and first-request costs stay out of the intervals."""
    load = SlicedLoad(port)
    try:
        for concurrency in (HIGH, LOW):
            load.concurrency = concurrency
            wanted = {variant: done + 2 * concurrency for variant, done in load.done.items()}
            deadline = time.monotonic() + 90
            while any(load.done[v] < wanted[v] for v in HOSTS):
                load.check()
                assert time.monotonic() < deadline, f"the twins did not serve: {load.done}"
                time.sleep(0.2)
    finally:
        load.close()
    load.check()


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
    request has a deadline and `close` ends it. A load generator that stops sending, or whose
    requests fail, fails the test (`check`) instead of leaving the twins idle."""

    def __init__(self, port: int) -> None:
        self.concurrency = 0
        self.sent = 0
        self.done = {variant: 0 for variant in HOSTS}
        self.failures: list[str] = []
        self.crash: BaseException | None = None
        self._stop = threading.Event()
        self._endpoints = [Endpoint(v, f"http://{host}:{port}", "") for v, host in HOSTS.items()]
        self._thread = threading.Thread(target=self._main, daemon=True)
        self._thread.start()

    def check(self) -> None:
        """Fail the test when the load generator died or its requests failed."""
        if self.crash is not None:
            raise AssertionError(f"the load generator died: {self.crash!r}") from self.crash
        assert not self.failures, f"requests to the twins failed: {self.failures[:3]}"

    def close(self) -> None:
        self._stop.set()
        self._thread.join(60)

    def _main(self) -> None:
        try:
            asyncio.run(self._run())
        except BaseException as exc:  # reported to the test by check()
            self.crash = exc

    async def _run(self) -> None:
        items = load_workload("chat").items
        clients = [make_client(e, 16, 60) for e in self._endpoints]
        try:
            arms = [
                (
                    client,
                    Endpoint(e.label, e.base_url, await resolve_model(client, e.base_url, e.label)),
                )
                for client, e in zip(clients, self._endpoints, strict=True)
            ]
            await self._slices(items, arms)
        finally:
            for client in clients:
                await client.aclose()

    async def _slices(self, items: Any, arms: list[tuple[Any, Endpoint]]) -> None:
        async def worker(client: Any, endpoint: Endpoint, deadline: float) -> None:
            while time.monotonic() < deadline and not self._stop.is_set():
                item = items[self.sent % len(items)]
                self.sent += 1
                body = request_body(endpoint, item, Sampling(ignore_eos=True), MAX_TOKENS)
                result = await stream_request(
                    client,
                    endpoint,
                    body,
                    timeout_s=60,
                    stall_s=30,
                    level_start=time.perf_counter(),
                )
                if result.ok:
                    self.done[endpoint.label] += 1
                else:
                    self.failures.append(f"{endpoint.label}: {result.error}")

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
        vllm={"enforce_eager": True, "max_num_batched_tokens": STEP_TOKENS},
        policy=policy,
    )


def test_switch_follows_the_crossover_without_flapping(
    twins: tuple[LayeredModels, int],
    cluster: tuple[FakeCluster, Operator],
    high_load_ratio: float,
    low_load_ratio: float,
) -> None:
    models, port = twins
    if low_load_ratio < 1.15:
        # Seen on a 2-core AMD EPYC: per-forward overhead makes the k=8 draft's eight steps cost
        # more than they save, so the speculative twin is no faster even at concurrency 1
        # (tune there: k=2 1.12x, k=8 0.90x). Without a side where speculation wins there is
        # no crossover for `switch` to follow.
        pytest.skip(
            f"on this CPU the speculative twin is not faster at concurrency {LOW}: "
            f"{low_load_ratio:.2f}x as fast in request time per output token as the baseline "
            "(vLLM's own /metrics, measured before the operator ran); the test needs it 1.15x "
            "or faster"
        )
    if high_load_ratio > 0.85:
        # Seen on a 2-core Xeon with AMX (bf16 matrix units): a verify pass over 12 x 9 tokens
        # costs barely more than one over 12, so the noisy k=8 draft stayed 1.5-2x faster at
        # concurrency 12 (fp32 and a 16-token budget were tried too). Without a crossover there is
        # nothing for `switch` to follow; the policy itself is tested on scripted twins
        # (tests/operator/test_loop.py, tests/operator/test_policy.py).
        pytest.skip(
            f"this CPU has no crossover below concurrency {HIGH}: the speculative twin is "
            f"{high_load_ratio:.2f}x as fast in request time per output token as the baseline "
            "there (vLLM's own /metrics, measured before the operator ran); the test needs it "
            "0.85x or slower"
        )
    api, operator = cluster
    policy = {
        "mode": "switch",
        "interval_seconds": INTERVAL_S,
        "dwell_seconds": DWELL_S,
        "hysteresis": 0.05,
        "smoothing": 0.5,
        "min_requests": 2,
    }
    api.put(*CR, layered_resource(models, port, policy, "qwen3-8b-ngram"))
    wait_for("the twins", lambda: len(api.list("apis/apps/v1", "deployments")) == 2, operator)
    history: list[tuple[int, str | None]] = []  # (concurrency, the twin traffic went to)
    intervals: dict[float, str] = {}  # every interval's decision, for the failure message
    load = SlicedLoad(port)

    def watch(what: str, until: Any, timeout: float) -> None:
        """Keep the load, recording where traffic goes, until `until()` or fail after `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            load.check()
            history.append((load.concurrency, selector(api)))
            last = status_of(api).get("lastDecision") or {}
            if last:
                intervals[last["at"]] = f"c={load.concurrency} {last['reason']}: {last['message']}"
            if until():
                return
            if time.monotonic() > deadline or not operator.alive():
                tail = "\n".join(operator.output().splitlines()[-20:])
                pytest.fail(
                    f"{what}: not within {timeout:.0f} s\n"
                    + "\n".join(intervals.values())
                    + f"\n{tail}"
                )
            time.sleep(0.5)

    def holding(seconds: float) -> Any:
        end = time.monotonic() + seconds
        return lambda: time.monotonic() >= end

    def decided(reason: str) -> Any:
        return lambda: (status_of(api).get("lastDecision") or {}).get("reason") == reason

    try:
        load.concurrency = LOW
        time.sleep(INTERVAL_S)  # the load is steady before the operator sees the pods
        add_pods(api)
        # the operator times both twins at low load: speculation wins
        watch("speculation measured faster at low load", decided("Winning"), 60)
        load.concurrency = HIGH  # above the crossover: traffic moves to the baseline ...
        watch("traffic on the baseline at high load", lambda: selector(api) == "baseline", 90)
        watch("traffic kept on the baseline", holding(DWELL_S + INTERVAL_S), 60)  # ... and stays
        load.concurrency = LOW  # below it again: traffic comes back, and stays
        watch("traffic back at low load", lambda: selector(api) == "speculative", 90)
        watch("traffic kept on the speculative twin", holding(2 * INTERVAL_S), 60)
    finally:
        load.close()
    decisions = status_of(api).get("decisions") or []
    print("decisions:", json.dumps(decisions, indent=1))  # shown with -s: the measured figures
    summary = "\n".join(intervals.values())
    print("every interval:", summary)
    switches = [d for d in decisions if d["action"] == "switch"]
    assert [d["active"] for d in switches] == ["baseline", "speculative"], summary  # no flapping
    assert history[0] == (LOW, "speculative")
    moved = next(i for i, (_, active) in enumerate(history) if active == "baseline")
    assert history[moved][0] == HIGH and history[-1] == (LOW, "speculative")
    assert all(active == "baseline" for c, active in history[moved:] if c == HIGH)
    to_baseline, back = switches
    for decision in (to_baseline, back):  # the figures behind each switch are in status
        evidence = decision["evidence"]
        assert evidence["speculative"]["smoothedLatencyPerTokenMs"]
        assert evidence["baseline"]["smoothedLatencyPerTokenMs"]
        assert 1.0 < evidence["acceptanceLength"] < K + 1
        assert len(evidence["perPosition"]) == K
    assert to_baseline["reason"] == "BaselineWins" and back["reason"] == "SpeculationWins"
    assert (
        to_baseline["evidence"]["speculative"]["smoothedLatencyPerTokenMs"]
        > to_baseline["evidence"]["baseline"]["smoothedLatencyPerTokenMs"]
    )
    assert (
        back["evidence"]["speculative"]["smoothedLatencyPerTokenMs"]
        < back["evidence"]["baseline"]["smoothedLatencyPerTokenMs"]
    )
    # the load each switch was decided at: requests in the server, in doubling ranges ("5-8")
    assert _least(to_baseline["evidence"]["load"]) > _least(back["evidence"]["load"])
    assert back["at"] - to_baseline["at"] >= DWELL_S


def _least(level: str) -> int:
    """The lower end of a load level ("1", "2", "3-4", "5-8", ...)."""
    return int(level.split("-")[0])


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

    def per_position() -> list[float] | None:
        load.check()
        positions = (status_of(api).get("acceptance") or {}).get("perPosition") or []
        return positions if len(positions) == K else None

    def retuned() -> dict[str, Any] | None:
        load.check()
        decisions = status_of(api).get("decisions") or []
        return next((d for d in decisions if d["action"] == "retune"), None)

    try:
        measured = wait_for("per-position acceptance", per_position, operator)
        assert measured[0] > measured[-1]  # deep positions are accepted less often
        threshold = round((measured[0] + measured[-1]) / 2, 3)
        document["spec"]["policy"]["retune"]["lower_below"] = threshold
        api.put(*CR, document)
        decision = wait_for("a retune", retuned, operator, timeout=60)
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


def test_failover_moves_traffic_off_a_twin_that_stops_answering_within_an_interval(
    twins: tuple[LayeredModels, int], cluster: tuple[FakeCluster, Operator]
) -> None:
    models, port = twins
    api, operator = cluster
    # a dwell far longer than the test: only the health gate can move traffic
    policy = {"mode": "switch", "interval_seconds": INTERVAL_S, "dwell_seconds": 3600}
    api.put(*CR, layered_resource(models, port, policy, "qwen3-8b-ngram"))
    wait_for("the twins", lambda: len(api.list("apis/apps/v1", "deployments")) == 2, operator)
    add_pods(api)

    def scraped_both() -> bool:
        return (status_of(api).get("loop") or {}).get("unhealthy") == []

    wait_for("both twins scraped", scraped_both, operator, timeout=60)
    assert selector(api) == "speculative"
    server = SERVERS["speculative"]
    server.send_signal(signal.SIGSTOP)  # its pod stays Ready; /metrics no longer answers
    stopped = time.monotonic()
    try:
        # The next tick after the stop: its scrape waits out the deadline, then fails over.
        within = 2 * INTERVAL_S + SCRAPE_DEADLINE_S
        wait_for("traffic on the baseline", lambda: selector(api) == "baseline", operator, within)
        took = time.monotonic() - stopped
    finally:
        server.send_signal(signal.SIGCONT)
    print(f"failover {took:.1f} s after the speculative twin stopped answering")
    [event] = wait_for("the failover event", lambda: events(api, "ActiveUnhealthy"), operator)
    assert event["type"] == "Warning" and "speculative twin" in event["message"]
    status = status_of(api)
    assert status["decisions"][-1]["reason"] == "ActiveUnhealthy"
    assert status["traffic"]["active"] == "baseline" and status["verdict"] == "BaselineServes"
    wait_for("the twin healthy again", lambda: events(api, "TwinHealthy"), operator, timeout=60)
    assert (status_of(api).get("loop") or {}).get("unhealthy") == []
