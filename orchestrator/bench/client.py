"""One streamed request to an OpenAI-compatible endpoint, timed; and the endpoint probe.

`stream_request` never raises for what the server does (refused connection, HTTP error, a body
that is not an OpenAI stream, an error event or stall mid-stream, a timeout): it returns a failed
`RequestResult` whose `error` says what happened. Only cancellation propagates. `httpx` is
imported here, and this module is imported only on the bench code path (CLI start-up stays fast).
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Literal
from urllib.parse import urlsplit

import httpx

from orchestrator.bench.workload import WorkItem
from orchestrator.errors import BenchError

Api = Literal["completions", "chat"]
Clock = Callable[[], float]
_LOOPBACK: Final = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


@dataclass(frozen=True)
class Endpoint:
    """One arm of the A/B: where to send requests and how."""

    label: str
    base_url: str
    """Server root or its /v1 root; both are accepted."""
    model: str
    api: Api = "completions"
    api_key: str | None = field(default=None, repr=False)

    @property
    def api_root(self) -> str:
        root = self.base_url.rstrip("/")
        return root if root.endswith("/v1") else f"{root}/v1"

    @property
    def metrics_url(self) -> str:
        return f"{self.api_root.removesuffix('/v1')}/metrics"


@dataclass(frozen=True)
class Sampling:
    """Sampling settings, sent identically to both arms. Greedy by default."""

    temperature: float = 0.0
    top_p: float | None = None
    seed: int | None = None
    ignore_eos: bool = False
    """vLLM/SGLang extension: generate exactly max_tokens, so both arms emit equal lengths."""


@dataclass(frozen=True)
class RequestResult:
    """What one request did, with times in seconds from its own start."""

    ok: bool
    error: str | None
    started_s: float
    """Start time, seconds since the level started."""
    latency_s: float
    ttft_s: float | None
    chunk_gaps_s: tuple[float, ...]
    """Gaps between successive content chunks (inter-token latency; a chunk may hold several
    tokens when the engine commits several per step, as speculation does)."""
    output_tokens: int
    text: str
    item: int = 0
    """Index of the work item sent, so both arms' outputs can be paired."""
    due_s: float | None = None
    """Open loop: when the schedule had the request arrive, seconds since the level started."""

    @property
    def decode_s(self) -> float | None:
        return None if self.ttft_s is None else self.latency_s - self.ttft_s

    @property
    def tpot_s(self) -> float | None:
        """Time per output token after the first."""
        decode = self.decode_s
        return decode / (self.output_tokens - 1) if decode and self.output_tokens > 1 else None

    @property
    def tokens_per_s(self) -> float | None:
        """Output tokens per second of end-to-end latency (prefill included)."""
        return self.output_tokens / self.latency_s if self.ok and self.latency_s > 0 else None


def make_client(endpoint: Endpoint, concurrency: int, stall_s: float) -> httpx.AsyncClient:
    """An HTTP client for one arm: enough connections for the level, read timeout = stall."""
    headers = {"Authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}
    host = urlsplit(endpoint.base_url).hostname or ""
    local = host in _LOOPBACK
    transport = httpx.AsyncHTTPTransport(
        limits=httpx.Limits(max_connections=concurrency + 2, max_keepalive_connections=concurrency),
        # Small request writes must not wait for Nagle's algorithm (aiohttp sets this too).
        socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)],
        trust_env=not local,
    )
    return httpx.AsyncClient(
        headers=headers,
        timeout=httpx.Timeout(stall_s, connect=min(stall_s, 10.0)),
        transport=transport,
        trust_env=not local,  # never route loopback through a proxy from the environment
    )


def request_body(
    endpoint: Endpoint, item: WorkItem, sampling: Sampling, max_tokens: int
) -> dict[str, Any]:
    """The JSON body for one streamed request (same for both arms but the model name)."""
    body: dict[str, Any] = {
        "model": endpoint.model,
        "max_tokens": item.max_tokens or max_tokens,
        "temperature": sampling.temperature,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if endpoint.api == "chat":
        body["messages"] = [{"role": m.role, "content": m.content} for m in item.messages]
        if item.prediction is not None:
            body["prediction"] = {"type": "content", "content": item.prediction}
    else:
        body["prompt"] = item.prompt
    for key, value in (("top_p", sampling.top_p), ("seed", sampling.seed)):
        if value is not None:
            body[key] = value
    if sampling.ignore_eos:
        body["ignore_eos"] = True
    return body


async def stream_request(
    client: httpx.AsyncClient,
    endpoint: Endpoint,
    body: dict[str, Any],
    *,
    timeout_s: float,
    stall_s: float,
    level_start: float,
    clock: Clock = time.perf_counter,
) -> RequestResult:
    """Send one streamed request and time it; failures come back as results, never raised."""
    trace = _Trace(clock(), endpoint.api)
    try:
        await asyncio.wait_for(_stream(client, endpoint, body, trace, clock), timeout_s)
    except asyncio.TimeoutError:
        trace.fail(f"timed out after {timeout_s:g} s ({trace.tokens} tokens received)")
    except httpx.ConnectError as exc:
        trace.fail(f"cannot connect to {endpoint.api_root}: {exc}")
    except httpx.ReadTimeout:
        trace.fail(f"stalled: no data for {stall_s:g} s after {trace.tokens} tokens")
    except (httpx.TransportError, httpx.StreamError) as exc:
        trace.fail(f"connection failed mid-stream after {trace.tokens} tokens: {exc!r}")
    return trace.result(clock(), level_start)


@dataclass
class _Trace:
    start: float
    api: Api
    first: float | None = None
    last: float | None = None
    gaps: list[float] = field(default_factory=list)
    chunks: int = 0
    usage_tokens: int | None = None
    parts: list[str] = field(default_factory=list)
    done: bool = False
    finished: float | None = None
    """When [DONE] arrived; the request's end even if the connection lingers."""
    error: str | None = None

    @property
    def tokens(self) -> int:
        return self.usage_tokens if self.usage_tokens is not None else self.chunks

    def fail(self, message: str) -> None:
        """Record a transport failure, unless the stream already finished ([DONE] seen)."""
        if not self.done:
            self.error = message

    def content(self, now: float, text: str) -> None:
        if self.first is None:
            self.first = now
        elif self.last is not None:
            self.gaps.append(now - self.last)
        self.last = now
        self.chunks += 1
        self.parts.append(text)

    def result(self, end: float, level_start: float) -> RequestResult:
        error = self.error
        if error is None and not self.done:
            error = "stream ended without [DONE]"
        if error is None and self.first is None:
            error = "the stream carried no generated text"
        return RequestResult(
            ok=error is None,
            error=error,
            started_s=self.start - level_start,
            latency_s=(self.finished or end) - self.start,
            ttft_s=None if self.first is None else self.first - self.start,
            chunk_gaps_s=tuple(self.gaps),
            output_tokens=self.tokens,
            text="".join(self.parts),
        )


async def _stream(
    client: httpx.AsyncClient,
    endpoint: Endpoint,
    body: dict[str, Any],
    trace: _Trace,
    clock: Clock,
) -> None:
    path = "/chat/completions" if endpoint.api == "chat" else "/completions"
    async with client.stream("POST", endpoint.api_root + path, json=body) as response:
        if response.status_code != 200:
            detail = (await response.aread())[:300].decode("utf-8", "replace")
            trace.error = f"HTTP {response.status_code} from {endpoint.api_root}{path}: {detail}"
            return
        kind = response.headers.get("content-type", "")
        if "text/event-stream" not in kind:
            trace.error = f"not an OpenAI event stream (content-type {kind or 'missing'!r})"
            return
        async for line in response.aiter_lines():
            if trace.done or not line.startswith("data:"):
                continue  # after [DONE], read to the end so the connection is kept alive
            if _handle_event(line[5:].strip(), trace, clock()) and not trace.done:
                return


def _handle_event(payload: str, trace: _Trace, now: float) -> bool:
    """Apply one SSE data payload; True when the stream is over (done or failed)."""
    if payload == "[DONE]":
        trace.done, trace.finished = True, now
        return True
    try:
        event = json.loads(payload)
    except json.JSONDecodeError:
        trace.error = f"not an OpenAI stream: event is not JSON ({payload[:80]!r})"
        return True
    if not isinstance(event, dict) or "error" in event:
        err = event.get("error") if isinstance(event, dict) else event
        trace.error = f"error event mid-stream after {trace.tokens} tokens: {err}"
        return True
    usage = event.get("usage")
    if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
        trace.usage_tokens = usage["completion_tokens"]
    text = _chunk_text(event, trace.api)
    if text:
        trace.content(now, text)
    return False


def _chunk_text(event: dict[str, Any], api: Api) -> str:
    choices = event.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return ""
    choice = choices[0]
    if api == "completions":
        text = choice.get("text")
        return text if isinstance(text, str) else ""
    delta = choice.get("delta")
    if not isinstance(delta, dict):
        return ""
    # Reasoning models stream thinking in a separate field; it costs decode time all the same.
    parts = (delta.get("content"), delta.get("reasoning_content"), delta.get("reasoning"))
    return "".join(p for p in parts if isinstance(p, str))


async def resolve_model(client: httpx.AsyncClient, base_url: str, label: str) -> str:
    """The first model id an endpoint serves (GET /v1/models), or a BenchError saying why not."""
    url = Endpoint(label, base_url, "").api_root + "/models"
    try:
        response = await client.get(url)
    except httpx.HTTPError as exc:
        raise _unusable(label, url, f"cannot connect ({exc!r})") from None
    try:
        data = response.json().get("data") if response.status_code == 200 else None
    except (json.JSONDecodeError, AttributeError):
        data = None
    if not isinstance(data, list) or not data or not isinstance(data[0], dict):
        problem = f"HTTP {response.status_code}, not an OpenAI model list"
        raise _unusable(label, url, problem)
    return str(data[0].get("id"))


def _unusable(label: str, url: str, problem: str) -> BenchError:
    return BenchError(
        f"--{label} {url}: {problem}",
        why="the bench can only drive an OpenAI-compatible server that is up and serving a model",
        fix=f"start the {label} server (vLLM: `vllm serve MODEL`) and pass its root URL, "
        f"e.g. --{label} http://127.0.0.1:8000; or pass --model NAME",
    )


def check_usable(result: RequestResult, endpoint: Endpoint) -> None:
    """Raise a BenchError when the probe request to an arm failed."""
    if not result.ok:
        raise _unusable(endpoint.label, endpoint.api_root, f"probe request failed: {result.error}")
