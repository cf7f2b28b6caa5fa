"""The operator's own Prometheus metrics: thread-safe counters, gauges and histograms, the series
the operator keeps, their text exposition (format 0.0.4) and the server that answers GET /metrics.

Label values come from the operator's code (actions, reasons, results), never from a tenant's
resource or pod: a message or a URL would make a series per value. Even so every value is cut at
MAX_LABEL_CHARS, and a metric that would pass MAX_SERIES label sets files the rest under
OVERFLOW, so a bug cannot grow the operator's memory or its scrape without bound.
"""

from __future__ import annotations

import http.server
import math
import re
import socket
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, ClassVar, Final, TypeVar

from orchestrator.errors import UsageError

#: Longest label value kept; longer ones are cut (none the operator sets comes close).
MAX_LABEL_CHARS: Final = 64
#: Most label sets one metric keeps; the operator's have at most a few dozen.
MAX_SERIES: Final = 200
#: The label value of every label of the series past MAX_SERIES.
OVERFLOW: Final = "overflow"
#: Content type of the 0.0.4 text format (Prometheus' exposition_formats.md).
CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"
#: Seconds a /metrics client may take to send its request: a scraper sends it at once.
REQUEST_TIMEOUT_S: Final = 5.0
#: Requests answered at once; more are refused (Prometheus scrapes one at a time).
MAX_CONNECTIONS: Final = 8
#: Interval durations, in seconds: a quiet interval takes milliseconds, a scrape deadline is
#: 5 s per pod (loop.SCRAPE_DEADLINE_S), and an interval past its period delays the next one.
INTERVAL_BUCKETS_S: Final = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

_NAME: Final = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL: Final = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")

Labels = tuple[str, ...]
_M = TypeVar("_M", bound="Metric")


class Metric:
    """One metric family: a name, its help, its label names and a value per label set."""

    kind: ClassVar[str]

    def __init__(
        self,
        name: str,
        help_text: str,
        labels: Sequence[str] = (),
        *,
        initial: Iterable[Labels] = (),
    ) -> None:
        if not _NAME.match(name) or any(not _LABEL.match(label) for label in labels):
            raise ValueError(f"not a Prometheus metric or label name: {name} {tuple(labels)}")
        self.name, self.help, self.labels = name, help_text, tuple(labels)
        self._lock = threading.Lock()
        self._series: dict[Labels, Any] = {}
        for values in initial:  # series that exist at 0 before anything happens, for rate()
            with self._lock:
                self._slot(self._key(dict(zip(self.labels, values, strict=True))))

    def lines(self) -> Iterator[str]:
        """The family's exposition lines, HELP and TYPE first."""
        yield f"# HELP {self.name} {_escape_help(self.help)}"
        yield f"# TYPE {self.name} {self.kind}"
        with self._lock:
            series = {key: self._copy(value) for key, value in sorted(self._series.items())}
        for key, value in series.items():
            yield from self._sample_lines(key, value)

    def _key(self, given: dict[str, str]) -> Labels:
        if set(given) != set(self.labels):
            raise ValueError(f"{self.name} takes labels {self.labels}, not {tuple(given)}")
        key = tuple(str(given[label])[:MAX_LABEL_CHARS] for label in self.labels)
        if key not in self._series and len(self._series) >= MAX_SERIES:
            return tuple(OVERFLOW for _ in self.labels)
        return key

    def _slot(self, key: Labels) -> Any:
        if key not in self._series:
            self._series[key] = self._zero()
        return self._series[key]

    def _zero(self) -> Any:
        return 0.0

    def _copy(self, value: Any) -> Any:
        return value

    def _sample_lines(self, key: Labels, value: Any) -> Iterator[str]:
        yield f"{self.name}{_label_set(self.labels, key)} {_number(value)}"


class _Scalar(Metric):
    def value(self, **labels: str) -> float:
        """The value of one label set (0 before anything happened)."""
        with self._lock:
            found: float = self._series.get(self._key(labels), 0.0)
            return found


class Counter(_Scalar):
    """A total that only grows while the process lives."""

    kind = "counter"

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        if amount < 0:
            raise ValueError(f"{self.name}: a counter cannot go down ({amount})")
        with self._lock:
            key = self._key(labels)
            self._series[key] = self._slot(key) + amount


class Gauge(_Scalar):
    """A value that goes up and down."""

    kind = "gauge"

    def set(self, value: float, **labels: str) -> None:
        with self._lock:
            self._series[self._key(labels)] = float(value)

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        with self._lock:
            key = self._key(labels)
            self._series[key] = self._slot(key) + amount

    def dec(self, amount: float = 1.0, **labels: str) -> None:
        self.inc(-amount, **labels)


class Histogram(Metric):
    """Observations counted in cumulative buckets (`le`, upper bounds inclusive, then +Inf),
    with their sum and count."""

    kind = "histogram"

    def __init__(
        self,
        name: str,
        help_text: str,
        labels: Sequence[str] = (),
        *,
        buckets: Sequence[float],
        initial: Iterable[Labels] = (),
    ) -> None:
        bounds = sorted(float(b) for b in buckets if not math.isinf(b))
        if not bounds or len(set(bounds)) != len(bounds) or "le" in labels:
            raise ValueError(f"{name}: buckets must be distinct finite bounds, and no label le")
        self.bounds: tuple[float, ...] = (*bounds, math.inf)
        super().__init__(name, help_text, labels, initial=initial)

    def observe(self, value: float, **labels: str) -> None:
        if math.isnan(value):
            return  # in no bucket, it would make the count disagree with +Inf
        with self._lock:
            counts, totals = self._slot(self._key(labels))
            for i, bound in enumerate(self.bounds):
                if value <= bound:
                    counts[i] += 1  # every bucket from the first that holds it: cumulative
            totals[0] += value
            totals[1] += 1

    def _zero(self) -> Any:
        return [0] * len(self.bounds), [0.0, 0]

    def _copy(self, value: Any) -> Any:
        return list(value[0]), list(value[1])

    def _sample_lines(self, key: Labels, value: Any) -> Iterator[str]:
        counts, (total, count) = value
        for bound, seen in zip(self.bounds, counts, strict=True):
            labels = _label_set((*self.labels, "le"), (*key, _number(bound)))
            yield f"{self.name}_bucket{labels} {seen}"
        yield f"{self.name}_sum{_label_set(self.labels, key)} {_number(total)}"
        yield f"{self.name}_count{_label_set(self.labels, key)} {count}"


class Registry:
    """The metrics one /metrics answer shows, in the order they were made."""

    def __init__(self) -> None:
        self._metrics: dict[str, Metric] = {}
        self._lock = threading.Lock()

    def counter(self, name: str, help_text: str, labels: Sequence[str] = (), **kw: Any) -> Counter:
        return self._add(Counter(name, help_text, labels, **kw))

    def gauge(self, name: str, help_text: str, labels: Sequence[str] = (), **kw: Any) -> Gauge:
        return self._add(Gauge(name, help_text, labels, **kw))

    def histogram(
        self, name: str, help_text: str, labels: Sequence[str] = (), **kw: Any
    ) -> Histogram:
        return self._add(Histogram(name, help_text, labels, **kw))

    def exposition(self) -> str:
        """Every metric in the text format 0.0.4, ending with a newline."""
        with self._lock:
            metrics = list(self._metrics.values())
        return "".join(line + "\n" for metric in metrics for line in metric.lines())

    def _add(self, metric: _M) -> _M:
        with self._lock:
            if metric.name in self._metrics:
                raise ValueError(f"metric {metric.name} is defined twice")
            self._metrics[metric.name] = metric
        return metric


def _label_set(names: Sequence[str], values: Sequence[str]) -> str:
    if not names:
        return ""
    pairs = (f'{n}="{_escape_value(v)}"' for n, v in zip(names, values, strict=True))
    return "{" + ",".join(pairs) + "}"


def _escape_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 2**53:  # exact as an integer: "3", not "3.0"
        return str(int(value))
    return repr(float(value))


# The operator's series (README "The operator", docs/cli.md `operator`).
REGISTRY: Final = Registry()
DECISION_ACTIONS: Final = ("hold", "switch", "retune")
SCRAPE_FAILURES: Final = ("timeout", "too_large", "http_status", "connection", "not_utf8")
DROPPED_SERIES: Final = ("non_finite", "position")
RECONCILE_TRIGGERS: Final = ("change", "loop")
RECONCILE_RESULTS: Final = ("ok", "invalid", "cluster_error", "error")
INTERVAL_FAILURES: Final = ("cluster_error", "error")

DECISIONS: Final = REGISTRY.counter(
    "specdeploy_operator_decisions_total",
    "Control-loop decisions, by action and reason as status.lastDecision has them (a failover "
    "is action switch, reason ActiveUnhealthy).",
    ("action", "reason"),
)
RECONCILES: Final = REGISTRY.counter(
    "specdeploy_operator_reconciles_total",
    "Reconciles (plan and apply), by trigger (change: create/update/resume; loop: an owned "
    "object was missing or a foreign one gone) and result.",
    ("trigger", "result"),
    initial=[(t, r) for t in RECONCILE_TRIGGERS for r in RECONCILE_RESULTS],
)
INTERVAL_SECONDS: Final = REGISTRY.histogram(
    "specdeploy_operator_interval_duration_seconds",
    "Time one control-loop interval of one resource took (scrapes, decision, status patch).",
    buckets=INTERVAL_BUCKETS_S,
    initial=[()],
)
INTERVAL_FAILURES_TOTAL: Final = REGISTRY.counter(
    "specdeploy_operator_interval_failures_total",
    "Control-loop intervals that ended in an error, by reason (the loop goes on).",
    ("reason",),
    initial=[(r,) for r in INTERVAL_FAILURES],
)
SCRAPES: Final = REGISTRY.counter(
    "specdeploy_operator_twin_scrapes_total",
    "Reads of a twin pod's /metrics.",
    initial=[()],
)
SCRAPE_FAILURES_TOTAL: Final = REGISTRY.counter(
    "specdeploy_operator_twin_scrape_failures_total",
    "Reads of a twin pod's /metrics that gave nothing, by reason.",
    ("reason",),
    initial=[(r,) for r in SCRAPE_FAILURES],
)
DROPPED_SERIES_TOTAL: Final = REGISTRY.counter(
    "specdeploy_operator_twin_scrape_series_dropped_total",
    "Series of a twin's /metrics left out, by reason (non_finite: +Inf or -Inf values; "
    "position: acceptance of a position the proposer does not draft).",
    ("reason",),
    initial=[(r,) for r in DROPPED_SERIES],
)
RESOURCES: Final = REGISTRY.gauge(
    "specdeploy_operator_resources",
    "SpeculativeDeployments whose control loop runs in this process.",
    initial=[()],
)
LEADER: Final = REGISTRY.gauge(
    "specdeploy_operator_leader",
    "1 while this process acts (holds the Lease, or runs without --leader-elect), else 0.",
    initial=[()],
)
LEASE_RENEWAL_FAILURES: Final = REGISTRY.counter(
    "specdeploy_operator_lease_renewal_failures_total",
    "Lease renewals the API server did not answer (a leader stops acting past the renew deadline).",
    initial=[()],
)


class MetricsServer:
    """GET /metrics on a daemon thread, until `close`."""

    def __init__(self, host: str, port: int, registry: Registry = REGISTRY) -> None:
        try:
            self._server = _Server((host, port), _handler(registry))
        except OSError as exc:
            raise UsageError(
                f"--metrics-bind {_address(host, port)}: cannot listen there ({exc.strerror})",
                why="the operator serves its own /metrics on that address and port",
                fix="pick a free port (the chart's metrics.port) or stop what listens on it; "
                "HOST must be an address of this machine (0.0.0.0 for all)",
            ) from exc
        self.port: int = self._server.server_address[1]
        self.url = f"http://{_address(host, self.port)}/metrics"
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="metrics", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=REQUEST_TIMEOUT_S)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True  # a restarted operator rebinds its port at once

    def __init__(self, address: tuple[str, int], handler: Any) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)  # busy: refuse rather than queue a thread per client
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


def _handler(registry: Registry) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        timeout = REQUEST_TIMEOUT_S  # a client that never finishes its request is cut off

        def do_GET(self) -> None:  # a GET has no body: nothing is read past the headers
            if self.path.split("?", 1)[0] != "/metrics":
                self.send_error(404, "only /metrics is served here")
                return
            body = registry.exposition().encode("utf-8")
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base's name)
            pass  # a scrape every 15 s is not worth a log line

    return Handler


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
