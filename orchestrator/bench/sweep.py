"""The sweep: for each load level, run the same requests against each arm, scraping the
engine's Prometheus metrics before and after.

A level is a concurrency (closed loop: that many clients, each sending its next request when the
last one finished) or a request rate (open loop: requests start on a seeded Poisson schedule,
whether or not earlier ones finished, as production traffic arrives; both arms get the same
schedule). Closed loop shows how a server behaves at a given occupancy; open loop shows the
latency users see at a given traffic, including the queueing a slower arm builds up.

Bounded: each arm-level sends at most `requests` requests and starts none after
`level_time_limit_s`; each request has its own total and stall timeouts. Ctrl-C ends the sweep
but keeps every finished request (the level in progress is kept and marked incomplete); so does
SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import Literal

from orchestrator.bench import client as http
from orchestrator.bench import connection
from orchestrator.bench.client import Endpoint, RequestResult, Sampling
from orchestrator.bench.connection import Client
from orchestrator.bench.metrics import Acceptance, PhaseTimes, acceptance, parse_prometheus
from orchestrator.bench.metrics import phase_times as phases_of
from orchestrator.bench.safe import printable
from orchestrator.bench.workload import WorkItem, Workload

Progress = Callable[[str], None]
PredictionOn = Literal["candidate", "both"]
_READ_ERRORS = (asyncio.TimeoutError, connection.TooLarge, *connection.TRANSPORT_ERRORS)


@dataclass(frozen=True, kw_only=True)
class SweepConfig:
    """How hard and how long to drive each arm."""

    concurrency: tuple[int, ...] = (1, 4, 16)
    request_rates: tuple[float, ...] = ()
    """Open-loop arrival rates (requests/s) to sweep instead of `concurrency`, when given."""
    requests: int = 32
    """Requests per arm per level (in open loop also the most that can be in flight)."""
    max_tokens: int = 256
    """Used for items that do not set their own max_tokens."""
    sampling: Sampling = field(default_factory=Sampling)
    timeout_s: float = 120.0
    """Total time one request may take."""
    stall_s: float = 30.0
    """Longest silence inside one stream before it counts as stalled."""
    level_time_limit_s: float = 600.0
    """No new request starts after this long in one arm-level."""
    scrape_metrics: bool = True
    arrival_seed: int = 0
    """Seed of the open-loop arrival schedules (one schedule per rate, shared by both arms)."""
    prediction_on: PredictionOn = "both"
    """Which arms get the work items' `prediction` (OpenAI Predicted Outputs, chat API only):
    "candidate" measures what a prediction buys on one endpoint, serving as both arms."""

    @property
    def small_read_s(self) -> float:
        """Total deadline of a /v1/models or /metrics read."""
        return min(self.timeout_s, connection.SMALL_READ_TIMEOUT_S)

    def sends_prediction(self, endpoint: Endpoint) -> bool:
        return self.prediction_on == "both" or endpoint.label == "candidate"

    def levels(self) -> list[tuple[int, float | None]]:
        """(concurrency, request rate) per level, in sweep order. An open-loop level's
        concurrency is its in-flight cap, `requests`."""
        if self.request_rates:
            return [(self.requests, rate) for rate in self.request_rates]
        return [(concurrency, None) for concurrency in self.concurrency]


def describe_load(concurrency: int, request_rate: float | None) -> str:
    """How reports name a level: "concurrency 4" or "2 req/s"."""
    return f"concurrency {concurrency}" if request_rate is None else f"{request_rate:g} req/s"


@dataclass(frozen=True)
class ArmLevel:
    """One arm at one load level: every request's result plus the engine's counters."""

    label: str
    concurrency: int
    results: tuple[RequestResult, ...]
    wall_s: float
    acceptance: Acceptance | None
    phases: PhaseTimes | None
    complete: bool = True
    metrics_note: str | None = None
    request_rate: float | None = None
    """Open-loop level: arrivals per second (`concurrency` is then the in-flight cap)."""

    @property
    def load(self) -> float:
        """Position on the swept axis: the request rate in open loop, else the concurrency."""
        return self.concurrency if self.request_rate is None else self.request_rate

    @property
    def load_text(self) -> str:
        return describe_load(self.concurrency, self.request_rate)


@dataclass
class SweepRecord:
    """What has been measured so far; survives Ctrl-C."""

    candidate: Endpoint
    baseline: Endpoint
    workload: Workload
    config: SweepConfig
    arms: list[ArmLevel] = field(default_factory=list)
    interrupted: bool = False
    only: Literal["candidate", "baseline"] | None = None
    """The one arm measured, when not both."""
    _open: tuple[str, int, float | None, float, list[RequestResult]] | None = None

    def start(self, label: str, concurrency: int, rate: float | None) -> list[RequestResult]:
        sink: list[RequestResult] = []
        self._open = (label, concurrency, rate, time.perf_counter(), sink)
        return sink

    def finish(self, arm: ArmLevel) -> None:
        self._open = None
        self.arms.append(arm)

    def interrupt(self) -> None:
        """Mark the sweep interrupted and keep the level in progress as incomplete."""
        self.interrupted = True
        if self._open is not None:
            label, concurrency, rate, began, sink = self._open
            wall = time.perf_counter() - began
            self.finish(
                ArmLevel(label, concurrency, tuple(sink), wall, None, None, False, None, rate)
            )


def run_sweep(
    candidate: Endpoint,
    baseline: Endpoint,
    workload: Workload,
    config: SweepConfig,
    progress: Progress = lambda _: None,
    *,
    only: Literal["candidate", "baseline"] | None = None,
) -> SweepRecord:
    """Probe both arms (BenchError when unusable), then sweep; returns what was measured, also
    when interrupted with Ctrl-C (SIGINT) or stopped with SIGTERM (the same graceful stop).
    `only` probes and measures that arm alone (the other need not be serving): `tune --local`
    serves one engine at a time."""
    record = SweepRecord(candidate, baseline, workload, config, only=only)
    terminated: list[int] = []
    try:
        asyncio.run(_sweep_until_sigterm(record, progress, terminated))
    except KeyboardInterrupt:
        record.interrupt()
        progress("interrupted: keeping what was measured so far")
    except asyncio.CancelledError:
        if not terminated:
            raise
        record.interrupt()
        progress("terminated (SIGTERM): keeping what was measured so far")
    return record


async def _sweep_until_sigterm(
    record: SweepRecord, progress: Progress, terminated: list[int]
) -> None:
    """`_sweep`, cancelled by SIGTERM as asyncio.run cancels it on SIGINT: the sweep task is
    cancelled from the event loop, so every request and connection closes in order and the
    record keeps what was measured. The previous SIGTERM handler is back once the sweep ends
    (a second SIGTERM during the stop meets it). Outside the main thread no handler can be set
    and SIGTERM keeps its previous meaning."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    previous = signal.getsignal(signal.SIGTERM)
    if previous is None:  # set outside Python: the default is the closest handler to restore
        previous = signal.SIG_DFL

    def on_sigterm(signum: int, _frame: FrameType | None) -> None:
        terminated.append(signum)
        signal.signal(signal.SIGTERM, previous)
        if task is not None:
            loop.call_soon_threadsafe(task.cancel)

    try:
        signal.signal(signal.SIGTERM, on_sigterm)
    except ValueError:  # not the main thread (e.g. a test runner's worker)
        await _sweep(record, progress)
        return
    try:
        await _sweep(record, progress)
    finally:
        signal.signal(signal.SIGTERM, previous)


async def _sweep(record: SweepRecord, progress: Progress) -> None:
    config = record.config
    levels = config.levels()
    width = max(concurrency for concurrency, _ in levels)
    clients = [
        http.make_client(arm, width, config.stall_s) for arm in (record.candidate, record.baseline)
    ]
    measured = {"candidate": [0], "baseline": [1], None: [0, 1]}[record.only]
    try:
        if 0 in measured:
            record.candidate = await _prepare(clients[0], record.candidate, record, progress)
        if 1 in measured:
            record.baseline = await _prepare(clients[1], record.baseline, record, progress)
        arms = (record.candidate, record.baseline)
        for index, (concurrency, rate) in enumerate(levels):
            # Alternate which arm goes first, so slow drift (thermal, caches) hits both.
            order = [0, 1] if index % 2 == 0 else [1, 0]
            for i in (i for i in order if i in measured):
                arm = await _run_arm_level(clients[i], arms[i], concurrency, rate, record, progress)
                record.finish(arm)
    finally:
        for c in clients:
            await c.aclose()


async def _prepare(
    client: Client, endpoint: Endpoint, record: SweepRecord, progress: Progress
) -> Endpoint:
    """Resolve the model name when not given and send one probe request (also a warm-up)."""
    config = record.config
    if not endpoint.model:
        model = await http.resolve_model(
            client, endpoint.base_url, endpoint.label, config.small_read_s
        )
        endpoint = dataclasses.replace(endpoint, model=model)
    item = record.workload.items[0]
    body = http.request_body(
        endpoint, item, config.sampling, 8, prediction=config.sends_prediction(endpoint)
    )
    result = await http.stream_request(
        client,
        endpoint,
        body,
        timeout_s=record.config.timeout_s,
        stall_s=record.config.stall_s,
        level_start=time.perf_counter(),
    )
    http.check_usable(result, endpoint)
    progress(f"{endpoint.label}: {endpoint.api_root} serves {printable(repr(endpoint.model))}")
    return endpoint


async def _run_arm_level(
    client: Client,
    endpoint: Endpoint,
    concurrency: int,
    rate: float | None,
    record: SweepRecord,
    progress: Progress,
) -> ArmLevel:
    config = record.config
    await _open_connections(client, endpoint, concurrency, config.small_read_s)
    before, note = await _scrape(client, endpoint, config)
    sink = record.start(endpoint.label, concurrency, rate)
    began = time.perf_counter()
    items = record.workload.items
    if rate is None:
        await _drive(client, endpoint, concurrency, items, config, sink, began)
    else:
        await _drive_open_loop(client, endpoint, rate, items, config, sink, began)
    wall = time.perf_counter() - began
    after, note_after = await _scrape(client, endpoint, config)
    accept = acceptance(before, after) if before is not None and after is not None else None
    phases = phases_of(before, after) if before is not None and after is not None else None
    arm = ArmLevel(
        endpoint.label,
        concurrency,
        tuple(sink),
        wall,
        accept,
        phases,
        True,
        note or note_after,
        rate,
    )
    progress(_summary(arm))
    return arm


async def _drive(
    client: Client,
    endpoint: Endpoint,
    concurrency: int,
    items: tuple[WorkItem, ...],
    config: SweepConfig,
    sink: list[RequestResult],
    began: float,
) -> None:
    """`concurrency` workers pull request numbers until `config.requests` were sent or the
    level's time limit passed; each keeps exactly one request in flight (closed loop)."""
    counter = iter(range(config.requests))
    deadline = began + config.level_time_limit_s

    async def worker() -> None:
        for number in counter:
            if time.perf_counter() >= deadline:
                return
            await _one_request(client, endpoint, number, items, config, sink, began)

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def _drive_open_loop(
    client: Client,
    endpoint: Endpoint,
    rate: float,
    items: tuple[WorkItem, ...],
    config: SweepConfig,
    sink: list[RequestResult],
    began: float,
) -> None:
    """Start each request at its arrival time, whether or not earlier ones finished (open
    loop); none after the level's time limit."""
    requests: list[asyncio.Task[None]] = []
    for number, offset in enumerate(arrival_offsets(rate, config.requests, config.arrival_seed)):
        if offset >= config.level_time_limit_s:
            break
        await asyncio.sleep(max(0.0, began + offset - time.perf_counter()))
        requests.append(
            asyncio.create_task(
                _one_request(client, endpoint, number, items, config, sink, began, offset)
            )
        )
    await asyncio.gather(*requests)


def arrival_offsets(rate: float, count: int, seed: int) -> list[float]:
    """Seconds from the level's start at which `count` requests arrive: a Poisson process of
    `rate` per second (exponential gaps), the first at once. It depends only on the seed and
    the rate, so both arms of a level receive the same schedule."""
    gaps = random.Random(f"{seed}/{rate}")
    offsets = [0.0]
    while len(offsets) < count:
        offsets.append(offsets[-1] + gaps.expovariate(rate))
    return offsets[:count]


async def _one_request(
    client: Client,
    endpoint: Endpoint,
    number: int,
    items: tuple[WorkItem, ...],
    config: SweepConfig,
    sink: list[RequestResult],
    began: float,
    due: float | None = None,
) -> None:
    index = number % len(items)
    body = http.request_body(
        endpoint,
        items[index],
        config.sampling,
        config.max_tokens,
        prediction=config.sends_prediction(endpoint),
    )
    result = await http.stream_request(
        client,
        endpoint,
        body,
        timeout_s=config.timeout_s,
        stall_s=config.stall_s,
        level_start=began,
        item=index,
        due_s=due,
    )
    sink.append(result)


async def _open_connections(
    client: Client, endpoint: Endpoint, count: int, deadline_s: float
) -> None:
    """Open `count` keep-alive connections (concurrent GET /v1/models) before timing a level, so
    connection set-up (and the resolver thread pool's start) is not charged to the first
    requests' TTFT; measured as up to 45 ms extra per new connection on loopback."""

    async def one() -> None:
        with contextlib.suppress(*_READ_ERRORS):  # the level's own requests say what is wrong
            await connection.get_small(client, endpoint.api_root + "/models", deadline_s)

    await asyncio.gather(*(one() for _ in range(count)))


async def _scrape(
    client: Client, endpoint: Endpoint, config: SweepConfig
) -> tuple[dict[str, float] | None, str | None]:
    if not config.scrape_metrics:
        return None, "metrics scraping disabled"
    url = endpoint.metrics_url
    try:
        status, body = await connection.get_small(client, url, config.small_read_s)
    except asyncio.TimeoutError:
        return None, f"cannot read {url}: no complete answer within {config.small_read_s:g} s"
    except _READ_ERRORS as exc:
        return None, f"cannot read {url}: {connection.describe(exc)}"
    if status != 200:
        return None, f"{url} answered HTTP {status}"
    return parse_prometheus(body.decode("utf-8", "replace")), None


def _summary(arm: ArmLevel) -> str:
    ok = [r for r in arm.results if r.ok]
    tokens = sum(r.output_tokens for r in ok)
    rate = tokens / arm.wall_s if arm.wall_s > 0 else 0.0
    accept = ""
    if arm.acceptance is not None and arm.acceptance.mean_acceptance_length is not None:
        accept = f", acceptance length {arm.acceptance.mean_acceptance_length:.2f}"
    failed = len(arm.results) - len(ok)
    if arm.request_rate is None:
        load = f"concurrency {arm.concurrency:>4}"
    else:
        load = f"rate {arm.request_rate:>7g} req/s"
    return (
        f"{load} {arm.label:<9}: {len(ok)} ok, {failed} failed, "
        f"{rate:.1f} output tok/s in {arm.wall_s:.1f} s{accept}"
    )
