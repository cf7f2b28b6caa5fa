"""One streamed request against the loopback server: timing, token counts and every failure
mode coming back as a result with a clear message, never an exception."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from orchestrator.bench.client import (
    Endpoint,
    RequestResult,
    Sampling,
    make_client,
    request_body,
    resolve_model,
    stream_request,
)
from orchestrator.bench.workload import Message, WorkItem
from orchestrator.errors import BenchError
from tests.unit.bench.conftest import StartServer

ITEM = WorkItem("say hi", (Message("user", "say hi"),), None, "hi there")


def run(
    endpoint: Endpoint, *, max_tokens: int = 8, timeout_s: float = 10.0, stall_s: float = 5.0
) -> RequestResult:
    (result,) = run_many(endpoint, 1, max_tokens=max_tokens, timeout_s=timeout_s, stall_s=stall_s)
    return result


def run_many(
    endpoint: Endpoint,
    count: int,
    *,
    concurrency: int = 1,
    max_tokens: int = 8,
    timeout_s: float = 10.0,
    stall_s: float = 5.0,
) -> list[RequestResult]:
    """`count` requests from `concurrency` closed-loop workers sharing one client, in order."""

    async def go() -> list[RequestResult]:
        numbers = iter(range(count))
        results: dict[int, RequestResult] = {}
        async with make_client(endpoint, concurrency, stall_s) as client:

            async def worker() -> None:
                for number in numbers:
                    body = request_body(endpoint, ITEM, Sampling(), max_tokens)
                    results[number] = await stream_request(
                        client,
                        endpoint,
                        body,
                        timeout_s=timeout_s,
                        stall_s=stall_s,
                        level_start=time.perf_counter(),
                    )

            await asyncio.gather(*(worker() for _ in range(concurrency)))
        return [results[n] for n in range(count)]

    return asyncio.run(go())


class TestTiming:
    def test_ttft_itl_and_tokens_follow_the_injected_delays(
        self, start_server: StartServer
    ) -> None:
        server = start_server(first_token_delay=0.05, step_delay=lambda active: 0.02)
        result = run(Endpoint("candidate", server.url, "m"), max_tokens=11)
        assert result.ok, result.error
        assert result.output_tokens == 11
        # never less than the injected delay; the generous upper bounds only catch a clock that
        # measures something else (timing error itself is measured in benchmarks/bench_client.py)
        assert result.ttft_s is not None and 0.05 <= result.ttft_s < 1.0
        assert len(result.chunk_gaps_s) == 10
        # one late chunk shortens the next gap, so bound the mean from below, not each gap
        assert sum(result.chunk_gaps_s) / 10 >= 0.019
        assert all(gap < 0.5 for gap in result.chunk_gaps_s)
        assert result.tpot_s is not None and 0.019 <= result.tpot_s < 0.5
        assert result.text.split() == [f"tok{i}" for i in range(11)]

    def test_several_tokens_per_chunk_counted_from_usage(self, start_server: StartServer) -> None:
        server = start_server(tokens_per_step=4)
        result = run(Endpoint("candidate", server.url + "/v1", "m", "chat"), max_tokens=9)
        assert result.ok, result.error
        assert result.output_tokens == 9
        assert len(result.chunk_gaps_s) == 2  # chunks: 1, 4, 4 tokens


class TestBody:
    def test_chat_passes_prediction_and_messages(self) -> None:
        body = request_body(
            Endpoint("c", "u", "m", "chat"), ITEM, Sampling(seed=3, ignore_eos=True), 7
        )
        assert body["messages"] == [{"role": "user", "content": "say hi"}]
        assert body["prediction"] == {"type": "content", "content": "hi there"}
        assert (body["max_tokens"], body["temperature"], body["seed"], body["ignore_eos"]) == (
            7,
            0.0,
            3,
            True,
        )
        assert body["stream"] is True

    def test_completions_uses_prompt_and_item_max_tokens(self) -> None:
        item = WorkItem("p", (Message("user", "p"),), 3)
        body: dict[str, Any] = request_body(Endpoint("c", "u", "m"), item, Sampling(), 99)
        assert (body["prompt"], body["max_tokens"]) == ("p", 3)
        assert "messages" not in body and "prediction" not in body and "top_p" not in body


class TestFailures:
    def test_unreachable(self, closed_port_url: str) -> None:
        result = run(Endpoint("candidate", closed_port_url, "m"))
        assert not result.ok and result.error is not None
        assert result.error.startswith("cannot connect")

    def test_not_openai(self, start_server: StartServer) -> None:
        result = run(Endpoint("candidate", start_server(not_openai=True).url, "m"))
        assert result.error is not None and "not an OpenAI event stream" in result.error

    def test_http_error(self, start_server: StartServer) -> None:
        result = run(Endpoint("candidate", start_server(http_500=True).url, "m"))
        assert result.error is not None and result.error.startswith("HTTP 500")

    def test_error_event_mid_stream(self, start_server: StartServer) -> None:
        result = run(Endpoint("candidate", start_server(error_after=3).url, "m"))
        assert result.error is not None and "error event mid-stream after 3 tokens" in result.error
        assert "injected failure" in result.error

    def test_stall_mid_stream(self, start_server: StartServer) -> None:
        began = time.perf_counter()
        result = run(Endpoint("candidate", start_server(stall_after=2).url, "m"), stall_s=0.3)
        assert result.error == "stalled: no data for 0.3 s after 2 tokens"
        assert time.perf_counter() - began < 10  # bounded: the server would stall for an hour

    def test_connection_dropped_mid_stream(self, start_server: StartServer) -> None:
        result = run(Endpoint("candidate", start_server(close_after=2).url, "m"))
        assert result.error is not None and "mid-stream after 2 tokens" in result.error

    def test_total_timeout(self, start_server: StartServer) -> None:
        server = start_server(step_delay=lambda active: 0.1)
        began = time.perf_counter()
        result = run(Endpoint("candidate", server.url, "m"), max_tokens=1000, timeout_s=0.35)
        assert result.error is not None and result.error.startswith("timed out after 0.35 s")
        assert time.perf_counter() - began < 10  # bounded: the whole stream would take 100 s


class TestUsage:
    """`usage.completion_tokens` is believed only when it can be true."""

    @pytest.mark.parametrize("usage", [-5, 10**30, 2, 9, 8.0, "8", True, None])
    def test_an_impossible_count_is_replaced_by_the_chunks(
        self, start_server: StartServer, usage: object
    ) -> None:
        # 8 requested tokens, 4 per step: chunks of 1, 4 and 3 tokens
        server = start_server(tokens_per_step=4, usage=usage if usage is not None else "x")
        result = run(Endpoint("candidate", server.url, "m"), max_tokens=8)
        assert result.ok and result.output_tokens == 3
        assert result.usage_note is not None and "but 3 chunks carried text" in result.usage_note

    @pytest.mark.parametrize("usage", [3, 8])
    def test_a_possible_count_is_believed(self, start_server: StartServer, usage: int) -> None:
        server = start_server(tokens_per_step=4, usage=usage)
        result = run(Endpoint("candidate", server.url, "m"), max_tokens=8)
        assert (result.output_tokens, result.usage_note) == (usage, None)


class TestRetry:
    """A request that fails before any response byte on a reused keep-alive connection is sent
    again, once, on a fresh connection; never after a response byte, never from a fresh one."""

    def test_a_server_that_closes_after_each_response_fails_no_request(
        self, start_server: StartServer
    ) -> None:
        # It closes every connection once a response is sent, without `Connection: close`, so
        # the client may pick a connection the server has already dropped.
        server = start_server(close_silently=True)
        results = run_many(Endpoint("candidate", server.url, "m"), 48, concurrency=4)
        assert [r.error for r in results if not r.ok] == []
        assert all(r.output_tokens == 8 for r in results)
        # a retried request had never reached the server: each was served exactly once
        assert server.counters.posts == 48

    def test_a_reused_connection_closed_unanswered_is_retried_once_on_a_fresh_one(
        self, start_server: StartServer
    ) -> None:
        server = start_server(hangup="silent", hangup_after=1)
        first, second = run_many(Endpoint("candidate", server.url, "m"), 2)
        assert first.ok and not first.retried
        # the second request reused the first's connection, found it closed, and was sent
        # once more on a new connection, which the server also closed unanswered
        assert second.retried and not second.ok
        assert second.error is not None and "before an answer" in second.error
        assert server.counters.posts == 3 and server.counters.connections == 2

    def test_never_retried_after_a_response_byte(self, start_server: StartServer) -> None:
        server = start_server(hangup="partial", hangup_after=1)
        first, second = run_many(Endpoint("candidate", server.url, "m"), 2)
        assert first.ok
        assert not second.ok and not second.retried
        assert server.counters.posts == 2

    def test_never_retried_from_a_fresh_connection(self, start_server: StartServer) -> None:
        server = start_server(hangup="silent", hangup_after=0)
        result = run(Endpoint("candidate", server.url, "m"))
        assert not result.ok and not result.retried
        assert server.counters.posts == 1


class TestResolveModel:
    def resolve(self, url: str) -> str:
        async def go() -> str:
            async with make_client(Endpoint("baseline", url, ""), 1, 5.0) as client:
                return await resolve_model(client, url, "baseline")

        return asyncio.run(go())

    def test_reads_the_first_model(self, start_server: StartServer) -> None:
        assert self.resolve(start_server(model="org/tiny").url) == "org/tiny"

    def test_unreachable_is_a_bench_error(self, closed_port_url: str) -> None:
        with pytest.raises(BenchError, match="cannot connect") as info:
            self.resolve(closed_port_url)
        assert info.value.exit_code == 7 and "--baseline" in info.value.fix

    def test_not_openai_is_a_bench_error(self, start_server: StartServer) -> None:
        with pytest.raises(BenchError, match="not an OpenAI model list"):
            self.resolve(start_server(not_openai=True).url)


def test_a_stall_after_done_does_not_fail_a_finished_request(start_server: StartServer) -> None:
    server = start_server(stall_after_done=True)
    result = run(Endpoint("candidate", server.url, "m"), max_tokens=4, stall_s=0.3)
    assert result.ok, result.error
    assert result.output_tokens == 4
    assert result.latency_s < 0.3  # the request ended at [DONE], not when the stall was noticed
