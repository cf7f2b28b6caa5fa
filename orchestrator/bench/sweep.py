"""The sweep: for each concurrency level, run the same requests against each arm, scraping the
engine's Prometheus metrics before and after.

Bounded: each arm-level sends at most `requests` requests and starts none after
`level_time_limit_s`; each request has its own total and stall timeouts. Ctrl-C ends the sweep
but keeps every finished request (the level in progress is kept and marked incomplete).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from orchestrator.bench import client as http
from orchestrator.bench.client import Endpoint, RequestResult, Sampling
from orchestrator.bench.metrics import Acceptance, PhaseTimes, acceptance, parse_prometheus
from orchestrator.bench.metrics import phase_times as phases_of
from orchestrator.bench.workload import WorkItem, Workload

Progress = Callable[[str], None]
_SCRAPE_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class SweepConfig:
    """How hard and how long to drive each arm."""

    concurrency: tuple[int, ...] = (1, 4, 16)
    requests: int = 32
    """Requests per arm per level."""
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


@dataclass(frozen=True)
class ArmLevel:
    """One arm at one concurrency level: every request's result plus the engine's counters."""

    label: str
    concurrency: int
    results: tuple[RequestResult, ...]
    wall_s: float
    acceptance: Acceptance | None
    phases: PhaseTimes | None
    complete: bool = True
    metrics_note: str | None = None


@dataclass
class SweepRecord:
    """What has been measured so far; survives Ctrl-C."""

    candidate: Endpoint
    baseline: Endpoint
    workload: Workload
    config: SweepConfig
    arms: list[ArmLevel] = field(default_factory=list)
    interrupted: bool = False
    _open: tuple[str, int, float, list[RequestResult]] | None = None

    def start(self, label: str, concurrency: int) -> list[RequestResult]:
        sink: list[RequestResult] = []
        self._open = (label, concurrency, time.perf_counter(), sink)
        return sink

    def finish(self, arm: ArmLevel) -> None:
        self._open = None
        self.arms.append(arm)

    def interrupt(self) -> None:
        """Mark the sweep interrupted and keep the level in progress as incomplete."""
        self.interrupted = True
        if self._open is not None:
            label, concurrency, began, sink = self._open
            wall = time.perf_counter() - began
            self.finish(ArmLevel(label, concurrency, tuple(sink), wall, None, None, False))


def run_sweep(
    candidate: Endpoint,
    baseline: Endpoint,
    workload: Workload,
    config: SweepConfig,
    progress: Progress = lambda _: None,
) -> SweepRecord:
    """Probe both arms (BenchError when unusable), then sweep; returns what was measured, also
    when interrupted with Ctrl-C."""
    record = SweepRecord(candidate, baseline, workload, config)
    try:
        asyncio.run(_sweep(record, progress))
    except KeyboardInterrupt:
        record.interrupt()
        progress("interrupted: keeping what was measured so far")
    return record


async def _sweep(record: SweepRecord, progress: Progress) -> None:
    config = record.config
    width = max(config.concurrency)
    clients = [
        http.make_client(arm, width, config.stall_s) for arm in (record.candidate, record.baseline)
    ]
    try:
        record.candidate = await _prepare(clients[0], record.candidate, record, progress)
        record.baseline = await _prepare(clients[1], record.baseline, record, progress)
        arms = (record.candidate, record.baseline)
        for index, concurrency in enumerate(config.concurrency):
            # Alternate which arm goes first, so slow drift (thermal, caches) hits both.
            order = [0, 1] if index % 2 == 0 else [1, 0]
            for i in order:
                arm = await _run_arm_level(clients[i], arms[i], concurrency, record, progress)
                record.finish(arm)
    finally:
        for c in clients:
            await c.aclose()


async def _prepare(
    client: httpx.AsyncClient, endpoint: Endpoint, record: SweepRecord, progress: Progress
) -> Endpoint:
    """Resolve the model name when not given and send one probe request (also a warm-up)."""
    if not endpoint.model:
        model = await http.resolve_model(client, endpoint.base_url, endpoint.label)
        endpoint = dataclasses.replace(endpoint, model=model)
    body = http.request_body(endpoint, record.workload.items[0], record.config.sampling, 8)
    result = await http.stream_request(
        client,
        endpoint,
        body,
        timeout_s=record.config.timeout_s,
        stall_s=record.config.stall_s,
        level_start=time.perf_counter(),
    )
    http.check_usable(result, endpoint)
    progress(f"{endpoint.label}: {endpoint.api_root} serves {endpoint.model!r}")
    return endpoint


async def _run_arm_level(
    client: httpx.AsyncClient,
    endpoint: Endpoint,
    concurrency: int,
    record: SweepRecord,
    progress: Progress,
) -> ArmLevel:
    config = record.config
    await _open_connections(client, endpoint, concurrency)
    before, note = await _scrape(client, endpoint, config.scrape_metrics)
    sink = record.start(endpoint.label, concurrency)
    began = time.perf_counter()
    await _drive(client, endpoint, concurrency, record.workload.items, config, sink, began)
    wall = time.perf_counter() - began
    after, note_after = await _scrape(client, endpoint, config.scrape_metrics)
    accept = acceptance(before, after) if before is not None and after is not None else None
    phases = phases_of(before, after) if before is not None and after is not None else None
    arm = ArmLevel(
        endpoint.label, concurrency, tuple(sink), wall, accept, phases, True, note or note_after
    )
    progress(_summary(arm))
    return arm


async def _drive(
    client: httpx.AsyncClient,
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
            index = number % len(items)
            body = http.request_body(endpoint, items[index], config.sampling, config.max_tokens)
            result = await http.stream_request(
                client,
                endpoint,
                body,
                timeout_s=config.timeout_s,
                stall_s=config.stall_s,
                level_start=began,
            )
            sink.append(dataclasses.replace(result, item=index))

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def _open_connections(client: httpx.AsyncClient, endpoint: Endpoint, count: int) -> None:
    """Open `count` keep-alive connections (concurrent GET /v1/models) before timing a level, so
    connection set-up (and the resolver thread pool's start) is not charged to the first
    requests' TTFT; measured as up to 45 ms extra per new connection on loopback."""

    async def one() -> None:
        with contextlib.suppress(httpx.HTTPError):
            await client.get(endpoint.api_root + "/models", timeout=_SCRAPE_TIMEOUT_S)

    await asyncio.gather(*(one() for _ in range(count)))


async def _scrape(
    client: httpx.AsyncClient, endpoint: Endpoint, enabled: bool
) -> tuple[dict[str, float] | None, str | None]:
    if not enabled:
        return None, "metrics scraping disabled"
    try:
        response = await client.get(endpoint.metrics_url, timeout=_SCRAPE_TIMEOUT_S)
    except httpx.HTTPError as exc:
        return None, f"cannot read {endpoint.metrics_url}: {exc!r}"
    if response.status_code != 200:
        return None, f"{endpoint.metrics_url} answered HTTP {response.status_code}"
    return parse_prometheus(response.text), None


def _summary(arm: ArmLevel) -> str:
    ok = [r for r in arm.results if r.ok]
    tokens = sum(r.output_tokens for r in ok)
    rate = tokens / arm.wall_s if arm.wall_s > 0 else 0.0
    accept = ""
    if arm.acceptance is not None and arm.acceptance.mean_acceptance_length is not None:
        accept = f", acceptance length {arm.acceptance.mean_acceptance_length:.2f}"
    failed = len(arm.results) - len(ok)
    return (
        f"concurrency {arm.concurrency:>4} {arm.label:<9}: {len(ok)} ok, {failed} failed, "
        f"{rate:.1f} output tok/s in {arm.wall_s:.1f} s{accept}"
    )
