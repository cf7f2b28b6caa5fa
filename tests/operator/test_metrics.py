"""The operator's own /metrics (issue 21, point 8): the exposition a Prometheus server parses
(read back with the repository's own parser), the bounded server that answers it, the flag and
the chart, and a real `specdeploy operator` whose counters move as it reconciles, decides, fails
over from a twin that stops answering, and scrapes."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from click.testing import CliRunner

from orchestrator.bench.metrics import parse_prometheus
from orchestrator.cli import cli
from orchestrator.errors import DeployError, UsageError
from orchestrator.operator import metrics
from orchestrator.operator.admission import IMAGES_ENV, SECRETS_ENV
from orchestrator.operator.leader import Elector, Timing
from orchestrator.operator.loop import _kept, read_metrics
from orchestrator.operator.metrics import (
    CONTENT_TYPE,
    MAX_LABEL_CHARS,
    MAX_SERIES,
    OVERFLOW,
    MetricsServer,
    Registry,
)
from orchestrator.operator.run import lead
from tests.operator.conftest import (
    CR,
    NAME,
    Operator,
    ScriptedTwin,
    add_pods,
    helm_run,
    resource,
    status_of,
    wait_for,
)
from tests.operator.fake_api import FakeCluster
from tests.operator.test_leader import Store
from tests.operator.test_scrape_bounds import metrics_server
from tests.support import REPO_ROOT


class TestExposition:
    def test_each_family_has_help_and_type_before_its_samples(self) -> None:
        registry = Registry()
        hits = registry.counter("x_hits_total", "Hits.\nSecond line with a \\.", ("kind",))
        depth = registry.gauge("x_depth", "Depth.")
        hits.inc(kind="a")
        hits.inc(2.5, kind="b")
        depth.set(7)
        depth.dec(3)
        text = registry.exposition()
        lines = text.splitlines()
        assert lines[:2] == [
            "# HELP x_hits_total Hits.\\nSecond line with a \\\\.",
            "# TYPE x_hits_total counter",
        ]
        assert lines[4:6] == ["# HELP x_depth Depth.", "# TYPE x_depth gauge"]
        assert text.endswith("\n")
        samples = parse_prometheus(text, by_label="kind")
        assert samples["x_hits_total"] == 3.5
        assert samples['x_hits_total{kind="b"}'] == 2.5
        assert samples["x_depth"] == 4

    def test_label_values_are_escaped_and_capped(self) -> None:
        registry = Registry()
        seen = registry.counter("x_total", "X.", ("why",))
        seen.inc(why='say "hi"\\\nbye')
        seen.inc(why="a" * 1000)
        text = registry.exposition()
        assert 'x_total{why="say \\"hi\\"\\\\\\nbye"} 1\n' in text
        assert f'x_total{{why="{"a" * MAX_LABEL_CHARS}"}} 1\n' in text
        assert len(text.splitlines()) == 4  # the newline did not break the sample's line
        assert parse_prometheus(text)["x_total"] == 2

    def test_series_past_the_cap_go_to_one_overflow_series(self) -> None:
        registry = Registry()
        seen = registry.counter("x_total", "X.", ("pod",))
        for i in range(MAX_SERIES + 50):
            seen.inc(pod=f"pod-{i}")
        text = registry.exposition()
        samples = [line for line in text.splitlines() if not line.startswith("#")]
        assert len(samples) == MAX_SERIES + 1
        assert f'x_total{{pod="{OVERFLOW}"}} 50' in samples
        assert parse_prometheus(text)["x_total"] == MAX_SERIES + 50  # nothing lost

    def test_histogram_buckets_are_cumulative_and_end_at_inf(self) -> None:
        registry = Registry()
        took = registry.histogram("x_seconds", "Took.", buckets=(1.0, 0.1, 0.5))
        for value in (0.05, 0.1, 0.3, 0.7, 12.0):
            took.observe(value)
        text = registry.exposition()
        buckets = parse_prometheus(text, by_label="le")
        assert [
            buckets[f'x_seconds_bucket{{le="{le}"}}'] for le in ("0.1", "0.5", "1", "+Inf")
        ] == [
            2,  # an upper bound is inclusive: 0.1 counts in le="0.1"
            3,
            4,
            5,
        ]
        assert buckets["x_seconds_count"] == 5
        assert buckets["x_seconds_sum"] == pytest.approx(13.15)
        assert "# TYPE x_seconds histogram" in text

    def test_the_operator_series_exist_at_zero_before_anything_happens(self) -> None:
        text = metrics.REGISTRY.exposition()
        samples = parse_prometheus(text, by_label="reason")
        for reason in metrics.SCRAPE_FAILURES:
            assert f'specdeploy_operator_twin_scrape_failures_total{{reason="{reason}"}}' in samples
        assert "specdeploy_operator_interval_duration_seconds_count" in samples
        assert "specdeploy_operator_leader" in samples
        names = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")]
        assert all(n.startswith("specdeploy_operator_") for n in names)
        assert len(names) == len(set(names))

    def test_concurrent_increments_are_all_counted(self) -> None:
        registry = Registry()
        seen = registry.counter("x_total", "X.", ("t",))
        took = registry.histogram("x_seconds", "X.", buckets=(1.0,))

        def work() -> None:
            for _ in range(20_000):
                seen.inc(t="one")
                took.observe(0.5)

        threads = [threading.Thread(target=work) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        samples = parse_prometheus(registry.exposition())
        assert samples["x_total"] == 80_000
        assert samples["x_seconds_count"] == 80_000 and samples["x_seconds_bucket"] == 160_000

    def test_wrong_labels_and_a_falling_counter_are_bugs(self) -> None:
        registry = Registry()
        seen = registry.counter("x_total", "X.", ("a",))
        with pytest.raises(ValueError, match="takes labels"):
            seen.inc(b="1")
        with pytest.raises(ValueError, match="cannot go down"):
            seen.inc(-1, a="1")
        with pytest.raises(ValueError, match="twice"):
            registry.gauge("x_total", "Again.")
        with pytest.raises(ValueError, match="not a Prometheus"):
            registry.gauge("x-y", "Dash.")


class TestScrapeFailures:
    @pytest.mark.parametrize(
        ("status", "body", "reason"),
        [(500, b"x_total 1\n", "http_status"), (200, b"x_total \xff\n", "not_utf8")],
    )
    def test_each_failed_read_is_counted_under_its_reason(
        self, status: int, body: bytes, reason: str
    ) -> None:
        before = metrics.SCRAPE_FAILURES_TOTAL.value(reason=reason)
        reads = metrics.SCRAPES.value()
        with metrics_server(body, status=status) as url:
            assert read_metrics(url) is None
            assert read_metrics(url) is None
        assert metrics.SCRAPE_FAILURES_TOTAL.value(reason=reason) == before + 2
        assert metrics.SCRAPES.value() == reads + 2

    def test_a_refused_connection_and_a_good_read(self) -> None:
        before = metrics.SCRAPE_FAILURES_TOTAL.value(reason="connection")
        assert read_metrics(f"http://127.0.0.1:{_free_port()}/metrics") is None
        assert metrics.SCRAPE_FAILURES_TOTAL.value(reason="connection") == before + 1
        failures = parse_prometheus(metrics.REGISTRY.exposition())
        with metrics_server(b"x_total 1\n") as url:
            assert read_metrics(url) == "x_total 1\n"
        after = parse_prometheus(metrics.REGISTRY.exposition())
        name = "specdeploy_operator_twin_scrape_failures_total"
        assert after[name] == failures[name]  # a good read is no failure

    def test_dropped_series_are_counted(self) -> None:
        before = metrics.DROPPED_SERIES_TOTAL.value(reason="position")
        samples = {f'a_total{{position="{i}"}}': 1.0 for i in range(10)}
        assert len(_kept(samples, 4)) == 4
        assert metrics.DROPPED_SERIES_TOTAL.value(reason="position") == before + 6


@contextlib.contextmanager
def serving(registry: Registry) -> Iterator[MetricsServer]:
    server = MetricsServer("127.0.0.1", 0, registry)
    try:
        yield server
    finally:
        server.close()


class TestServer:
    def test_get_metrics_answers_the_exposition_and_nothing_else_is_served(self) -> None:
        registry = Registry()
        registry.counter("x_total", "X.").inc(3)
        with serving(registry) as server:
            answer = httpx.get(server.url, trust_env=False)
            assert answer.status_code == 200
            assert answer.headers["content-type"] == CONTENT_TYPE
            assert parse_prometheus(answer.text)["x_total"] == 3
            root = server.url.removesuffix("/metrics")
            assert httpx.get(root + "/", trust_env=False).status_code == 404
            assert httpx.get(root + "/metricsx", trust_env=False).status_code == 404
            assert httpx.post(server.url, content=b"x" * 10, trust_env=False).status_code == 501

    def test_a_client_that_never_sends_its_request_does_not_hold_the_others(self) -> None:
        with serving(Registry()) as server:
            silent = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(3)]
            try:
                started = time.monotonic()
                assert httpx.get(server.url, trust_env=False, timeout=5).status_code == 200
                assert time.monotonic() - started < 2
            finally:
                for connection in silent:
                    connection.close()

    def test_it_stops_on_close(self) -> None:
        with serving(Registry()) as server:
            port = server.port
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"http://127.0.0.1:{port}/metrics", trust_env=False)

    def test_a_port_in_use_is_a_usage_error_that_says_what_to_do(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        for variable in (IMAGES_ENV, SECRETS_ENV):  # the command sets them for its plans
            monkeypatch.setenv(variable, "")
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            with pytest.raises(UsageError) as refused:
                MetricsServer("127.0.0.1", port)
            assert refused.value.exit_code == 2
            assert f"127.0.0.1:{port}" in refused.value.what and "free port" in refused.value.fix
            # the CLI says so before it touches a cluster (there is none here)
            result = CliRunner().invoke(cli, ["operator", "--metrics-bind", f"127.0.0.1:{port}"])
        assert result.exit_code == 2, result.output
        assert "cannot listen there" in result.output and "fix:" in result.output
        assert "Traceback" not in result.output

    @pytest.mark.parametrize("value", ["8081", "host:", ":8081", "h:0", "h:70000", "h:eighty"])
    def test_a_malformed_bind_is_a_usage_error(self, value: str) -> None:
        result = CliRunner().invoke(cli, ["operator", "--metrics-bind", value])
        assert result.exit_code == 2 and "HOST:PORT" in result.output
        assert "Traceback" not in result.output


class TestLeaderGauge:
    def test_one_while_leading_zero_once_the_lease_is_lost(self) -> None:
        store = Store()
        timing = Timing(lease_s=0.6, renew_deadline_s=0.4, retry_s=0.05)
        elector = Elector(store, "a", "ops", timing)
        assert elector.try_acquire_or_renew()
        seen: list[float] = []
        renewal_failures = metrics.LEASE_RENEWAL_FAILURES.value()

        async def operator(stop: asyncio.Event) -> None:
            await asyncio.sleep(0.1)
            seen.append(metrics.LEADER.value())
            store.get = _unreachable  # type: ignore[method-assign]  # the API server goes away
            await stop.wait()

        async def run() -> None:
            stop = asyncio.Event()
            await lead(operator(stop), elector, stop, lambda _: None)

        with pytest.raises(DeployError, match="lost its Lease"):
            asyncio.run(asyncio.wait_for(run(), timeout=10))
        assert seen == [1]
        assert metrics.LEADER.value() == 0
        assert metrics.LEASE_RENEWAL_FAILURES.value() > renewal_failures


def _unreachable() -> None:
    raise DeployError("read Lease ops/specdeploy-operator: connection refused")


def test_the_chart_serves_metrics_by_default_and_can_turn_them_off(helm: list[str]) -> None:
    chart = str(REPO_ROOT / "charts" / "specdeploy-operator")

    def pod(*args: str) -> Any:
        rendered = helm_run(helm, "template", "t", chart, *args)
        [deployment] = [d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "Deployment"]
        return deployment["spec"]["template"]

    default = pod("--set", "metrics.port=9100")
    [container] = default["spec"]["containers"]
    assert "--metrics-bind=0.0.0.0:9100" in container["args"]
    assert {"name": "metrics", "containerPort": 9100} in container["ports"]
    assert default["metadata"]["annotations"] == {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": "9100",
        "prometheus.io/path": "/metrics",
    }
    off = pod("--set", "metrics.enabled=false")
    [container] = off["spec"]["containers"]
    assert not any(a.startswith("--metrics-bind") for a in container["args"])
    assert [p["name"] for p in container["ports"]] == ["health"]
    assert "annotations" not in off["metadata"]


@pytest.mark.slow
def test_a_running_operator_counts_what_it_does(
    api: FakeCluster, tmp_path: Path, twins: dict[str, ScriptedTwin]
) -> None:
    port = _free_port()
    operator = Operator(api, tmp_path)
    operator.start("--metrics-bind", f"127.0.0.1:{port}")
    try:
        _drive(api, operator, twins, f"http://127.0.0.1:{port}/metrics")
    finally:
        operator.stop()


def _drive(api: FakeCluster, operator: Operator, twins: dict[str, ScriptedTwin], url: str) -> None:
    def scraped(by_label: str = "reason") -> dict[str, float]:
        """Sums by name, and by `by_label`'s value as `name{label="value"}`."""
        try:
            answer = httpx.get(url, trust_env=False, timeout=5)
        except httpx.HTTPError:
            return {}
        return parse_prometheus(answer.text, by_label=by_label) if answer.status_code == 200 else {}

    def series(name: str) -> float:
        label = name.partition("{")[2].partition("=")[0] or "reason"
        return scraped(label).get(name, 0.0)

    first = wait_for("the operator's /metrics", scraped, operator)
    assert first["specdeploy_operator_resources"] == 0
    wait_for("the leader gauge", lambda: series("specdeploy_operator_leader") == 1, operator)

    port = twins["speculative"].server.server_address[1]
    policy = {"mode": "switch", "interval_seconds": 1, "dwell_seconds": 600, "smoothing": 1.0}
    api.put(*CR, resource(policy=policy, serving={"port": port}))
    ok = 'specdeploy_operator_reconciles_total{result="ok"}'
    wait_for("a reconcile counted", lambda: series(ok) >= 1, operator)
    wait_for("one resource", lambda: series("specdeploy_operator_resources") == 1, operator)
    refused = resource(engine={"name": "vllm", "version": "0.32.0", "image": "evil/miner:1"})
    refused["metadata"]["name"] = "refused"
    api.put(*CR, refused)
    invalid = 'specdeploy_operator_reconciles_total{result="invalid"}'
    wait_for("the refused resource counted", lambda: series(invalid) == 1, operator)

    add_pods(api)
    twins["speculative"].per_token_s, twins["baseline"].per_token_s = 0.010, 0.020
    wait_for(
        "speculation winning",
        lambda: status_of(api).get("lastDecision", {}).get("reason") == "Winning",
        operator,
    )
    holds = 'specdeploy_operator_decisions_total{reason="Winning"}'
    wait_for("the hold counted", lambda: series(holds) >= 1, operator)
    assert series("specdeploy_operator_twin_scrapes_total") >= 4
    assert series('specdeploy_operator_twin_scrape_failures_total{reason="connection"}') == 0

    twins["speculative"].server.shutdown()  # its pod stops answering: connections refused
    twins["speculative"].server.server_close()
    failover = 'specdeploy_operator_decisions_total{reason="ActiveUnhealthy"}'
    after = wait_for("the failover counted", lambda: (s := scraped()).get(failover) and s, operator)
    assert after[failover] == 1
    assert after['specdeploy_operator_twin_scrape_failures_total{reason="connection"}'] >= 1
    intervals = scraped("le")
    assert intervals["specdeploy_operator_interval_duration_seconds_count"] >= 3
    assert (
        intervals['specdeploy_operator_interval_duration_seconds_bucket{le="+Inf"}']
        == (intervals["specdeploy_operator_interval_duration_seconds_count"])
    )
    assert status_of(api)["decisions"][-1]["reason"] == "ActiveUnhealthy"
    assert status_of(api, "refused")["verdict"] == "Invalid"
    assert NAME in operator.output()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port
