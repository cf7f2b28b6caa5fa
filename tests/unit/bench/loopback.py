"""A small OpenAI-compatible streaming server on 127.0.0.1 with injected latencies and faults.

It serves /v1/models, streamed /v1/completions and /v1/chat/completions, and /metrics with vLLM
spec-decode counters. Each decode step takes `step_delay(active)` seconds (kept on a deadline
clock, so scheduler lateness does not accumulate), where `active` is the number of requests
streaming at that moment, and commits `tokens_per_step` tokens (one chunk),
so a "speculative" server is one that commits several tokens per, slower, step. Faults:
`not_openai`, `http_500`, `error_after`, `stall_after`, `close_after`, `close_silently` (drop the
connection after each response without saying so), `hangup` (drop generation requests after the
first `hangup_after`, silently or after a partial status line). It runs its own event loop in a
thread, so the code under test can call `asyncio.run` freely.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

StepDelay = Callable[[int], float]


@dataclass
class Behaviour:
    """What the server does; mutable between tests but not during a request."""

    model: str = "tiny-target"
    step_delay: StepDelay = lambda active: 0.0
    first_token_delay: float = 0.0
    tokens_per_step: int = 1
    draft_tokens_per_step: int = 0
    """K: drafted tokens per step for the counters (0: not speculative, no spec counters)."""
    word: str = "tok"
    repeat: str | None = None
    """Emit this word for every token (a degenerate, looping output)."""
    not_openai: bool = False
    http_500: bool = False
    error_after: int | None = None
    stall_after: int | None = None
    close_after: int | None = None
    stall_after_done: bool = False
    metrics: bool = True
    close_silently: bool = False
    hangup: Literal["silent", "partial"] | None = None
    hangup_after: int = 0
    usage: object = None
    """Report this as usage.completion_tokens instead of the true count (a lying server)."""
    prediction_tokens_per_step: int | None = None
    """Tokens committed per step when the request's `prediction` is exactly the text this
    server will generate (Predicted Outputs: the server verifies the predicted tokens)."""


@dataclass
class Counters:
    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    requests: int = 0
    active: int = 0
    peak_active: int = 0
    finished: int = 0
    connections: int = 0
    posts: int = 0
    """Generation requests received, including hung-up ones."""
    prefill_s: float = 0.0
    decode_s: float = 0.0
    chunk_gap_sum_s: float = 0.0
    chunk_gaps: int = 0
    """Gaps between the content chunks as actually written (sleeps overshoot under load): the
    truth a client's inter-token latency is measured against."""
    bodies: list[dict[str, Any]] = field(default_factory=list)


class LoopbackServer:
    """Start with `with LoopbackServer(Behaviour(...)) as server:`; `server.url` is its root."""

    def __init__(
        self, behaviour: Behaviour | None = None, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.behaviour = behaviour or Behaviour()
        self.counters = Counters()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.base_events.Server | None = None
        self.host = host
        self.port = port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def __enter__(self) -> LoopbackServer:
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self._start(), self._loop)
        future.result(timeout=10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._handle, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in asyncio.all_tasks(self._loop):
            if task is not asyncio.current_task():
                task.cancel()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.counters.connections += 1
        try:
            while await self._one_request(reader, writer) and not self.behaviour.close_silently:
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def _one_request(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        line = await reader.readline()
        if not line:
            return False
        method, path, _ = line.decode().split(" ", 2)
        length = 0
        while (header := await reader.readline()) not in (b"\r\n", b"\n", b""):
            name, _, value = header.decode().partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        body = json.loads(await reader.readexactly(length)) if length else {}
        return await self._route(method, path, body, writer)

    async def _route(
        self, method: str, path: str, body: dict[str, Any], writer: asyncio.StreamWriter
    ) -> bool:
        b = self.behaviour
        if b.not_openai:
            await _send(writer, 200, "text/html", b"<html>hello</html>")
        elif path == "/health":
            await _send(writer, 200, "application/json", b"{}")
        elif path == "/v1/models":
            await _send(writer, 200, "application/json", _models(b.model))
        elif path == "/metrics" and b.metrics:
            await _send(writer, 200, "text/plain", self._metrics().encode())
        elif method == "POST" and path in ("/v1/completions", "/v1/chat/completions"):
            self.counters.posts += 1
            if b.hangup is not None and self.counters.posts > b.hangup_after:
                if b.hangup == "partial":
                    writer.write(b"HTTP/1.1 200 OK\r\n")
                    await writer.drain()
                return False
            if b.http_500:
                await _send(writer, 500, "application/json", b'{"error": "boom"}')
            else:
                return await self._generate(body, path.endswith("chat/completions"), writer)
        else:
            await _send(writer, 404, "application/json", b'{"detail": "Not Found"}')
        return True

    async def _generate(
        self, body: dict[str, Any], chat: bool, writer: asyncio.StreamWriter
    ) -> bool:
        c = self.counters
        c.requests += 1
        c.bodies.append(body)
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        c.active += 1
        c.peak_active = max(c.peak_active, c.active)
        max_tokens = int(body.get("max_tokens", 16))
        try:
            return await self._stream_tokens(max_tokens, chat, writer, self._per_step(body))
        finally:
            c.active -= 1

    def _per_step(self, body: dict[str, Any]) -> int:
        b = self.behaviour
        prediction = body.get("prediction") or {}
        expected = "".join(f"{b.word}{i} " for i in range(int(body.get("max_tokens", 16))))
        if b.prediction_tokens_per_step and prediction.get("content") == expected:
            return b.prediction_tokens_per_step
        return b.tokens_per_step

    async def _stream_tokens(
        self, max_tokens: int, chat: bool, writer: asyncio.StreamWriter, per_step: int
    ) -> bool:
        b, c = self.behaviour, self.counters
        began = time.perf_counter()
        await asyncio.sleep(b.first_token_delay)
        first = last = due = time.perf_counter()
        sent = 0
        while sent < max_tokens:
            if b.error_after is not None and sent >= b.error_after:
                await _event(writer, {"error": {"message": "injected failure", "code": 500}})
                break
            if b.stall_after is not None and sent >= b.stall_after:
                await asyncio.sleep(3600)
            if b.close_after is not None and sent >= b.close_after:
                writer.close()
                return False
            n = 1 if sent == 0 else min(per_step, max_tokens - sent)
            if sent:
                # paced on a deadline clock: a late wake-up (a loaded machine's scheduler)
                # shortens the next sleep instead of adding to every step, so a request's time
                # stays the sum of its steps' delays and not a count of its steps times the lateness
                due += b.step_delay(c.active)
                await asyncio.sleep(max(0.0, due - time.perf_counter()))
                if b.draft_tokens_per_step:
                    c.drafts += 1
                    c.draft_tokens += b.draft_tokens_per_step
                    c.accepted += n - 1
            words = (b.repeat or f"{b.word}{sent + i}" for i in range(n))
            written = time.perf_counter()
            if sent:
                c.chunk_gap_sum_s += written - last
                c.chunk_gaps += 1
            last = written
            await _event(writer, _chunk("".join(f"{w} " for w in words), chat))
            sent += n
        c.finished += 1
        c.prefill_s += first - began
        c.decode_s += time.perf_counter() - first
        usage = sent if b.usage is None else b.usage
        await _event(writer, {"choices": [], "usage": {"completion_tokens": usage}})
        await _chunked(writer, b"data: [DONE]\n\n")
        if b.stall_after_done:
            await asyncio.sleep(3600)
        await _chunked(writer, b"")
        return True

    def _metrics(self) -> str:
        c, b = self.counters, self.behaviour
        lines = ["# HELP vllm:num_requests_running running", "vllm:num_requests_running 0"]
        lines.append(f"loopback_chunk_gap_seconds_sum {c.chunk_gap_sum_s}")
        lines.append(f"loopback_chunk_gap_seconds_count {c.chunk_gaps}")
        for phase, total in (("prefill", c.prefill_s), ("decode", c.decode_s)):
            lines.append(f"vllm:request_{phase}_time_seconds_sum {total}")
            lines.append(f"vllm:request_{phase}_time_seconds_count {c.finished}.0")
        if b.draft_tokens_per_step:
            labels = f'{{engine="0",model_name="{b.model}"}}'
            lines += [
                "# TYPE vllm:spec_decode_num_drafts counter",
                f"vllm:spec_decode_num_drafts_total{labels} {c.drafts}.0",
                f"vllm:spec_decode_num_draft_tokens_total{labels} {c.draft_tokens}.0",
                f"vllm:spec_decode_num_accepted_tokens_total{labels} {c.accepted}.0",
            ]
        return "\n".join(lines) + "\n"


def _models(model: str) -> bytes:
    return json.dumps({"object": "list", "data": [{"id": model, "object": "model"}]}).encode()


def _chunk(text: str, chat: bool) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "finish_reason": None}
    if chat:
        choice["delta"] = {"content": text}
    else:
        choice["text"] = text
    return {"id": "x", "object": "chunk", "choices": [choice]}


async def _event(writer: asyncio.StreamWriter, payload: dict[str, Any]) -> None:
    await _chunked(writer, f"data: {json.dumps(payload)}\n\n".encode())


async def _chunked(writer: asyncio.StreamWriter, data: bytes) -> None:
    writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
    await writer.drain()


async def _send(writer: asyncio.StreamWriter, status: int, kind: str, data: bytes) -> None:
    reason = {200: "OK", 404: "Not Found", 500: "Internal Server Error"}[status]
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: {kind}\r\ncontent-length: {len(data)}\r\n\r\n"
    )
    writer.write(head.encode() + data)
    await writer.drain()
