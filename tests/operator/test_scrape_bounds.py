"""What one tenant's pod can do to the operator's scrape (issue 21): a huge /metrics body, a drip
of one byte at a time, +Inf and backwards counters, and 300,000 per-position series are each
bounded, skipped or ignored, and a pod joining or restarting does not make a phantom interval.
Real loopback HTTP servers; the operator's own scrape and differencing code."""

from __future__ import annotations

import contextlib
import http.server
import threading
import time
from collections.abc import Iterator

from orchestrator.operator.loop import (
    MAX_METRICS_BYTES,
    SCRAPE_DEADLINE_S,
    _common_sums,
    _kept,
    read_metrics,
)


@contextlib.contextmanager
def metrics_server(body: bytes, *, drip_s: float = 0.0, status: int = 200) -> Iterator[str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            try:
                if drip_s:
                    for byte in body:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        time.sleep(drip_s)
                else:
                    self.wfile.write(body)
            except OSError:
                pass  # the operator hung up, as it should

        def log_message(self, *_: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    finally:
        server.shutdown()


def test_an_ordinary_exposition_is_read() -> None:
    with metrics_server(b"vllm:num_requests_running 3\n") as url:
        assert read_metrics(url) == "vllm:num_requests_running 3\n"


def test_a_body_past_the_cap_is_skipped_without_holding_it() -> None:
    line = b"x_total 1\n"
    body = line * (MAX_METRICS_BYTES // len(line) + 10_000)
    with metrics_server(body) as url:
        assert read_metrics(url) is None


def test_a_drip_is_cut_at_the_whole_read_deadline() -> None:
    with metrics_server(b"x_total 1\n" * 100, drip_s=1.0) as url:
        started = time.monotonic()
        assert read_metrics(url) is None
        assert time.monotonic() - started < 2 * SCRAPE_DEADLINE_S + 2  # not 1000 s


def test_an_error_status_is_no_answer() -> None:
    with metrics_server(b"x_total 1\n", status=500) as url:
        assert read_metrics(url) is None


def test_infinite_values_and_positions_the_proposer_never_drafts_are_dropped() -> None:
    samples = {
        "vllm:spec_decode_num_drafts_total": float("inf"),
        "vllm:spec_decode_num_accepted_tokens_per_pos_total": 9.0,
        **{
            f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{position="{i}"}}': 1.0
            for i in range(300_000)
        },
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="x"}': 1.0,
    }
    kept = _kept(samples, 4)
    assert "vllm:spec_decode_num_drafts_total" not in kept
    assert len(kept) == 5  # the total and positions 0..3


def test_a_pod_joining_or_restarting_makes_no_phantom_interval() -> None:
    before = {"a": {"x_total": 100.0, "running": 4.0}}
    # b joins with a large counter, a restarts (its counter went back): neither is differenced
    after = {"a": {"x_total": 3.0, "running": 1.0}, "b": {"x_total": 5_000.0, "running": 2.0}}
    assert _common_sums(before, after) is None
    later = {"a": {"x_total": 10.0, "running": 2.0}, "b": {"x_total": 5_016.0, "running": 2.0}}
    first, second, pods = _common_sums(after, later) or ({}, {}, 0)
    assert pods == 2
    assert second["x_total"] - first["x_total"] == 23.0  # 7 + 16, not 5,000
    # a gauge that falls is not a reset
    assert _common_sums({"a": {"running": 4.0}}, {"a": {"running": 1.0}}) is not None
