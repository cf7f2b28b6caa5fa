"""One streamed request to an OpenAI-compatible endpoint, timed; and the endpoint probe.

`stream_request` never raises for what the server does (refused connection, HTTP error, a body
that is not an OpenAI stream, an error event or stall mid-stream, a timeout, a flood): it returns
a failed `RequestResult` whose `error` says what happened. Only cancellation propagates. Every
exchange has a total deadline and a byte cap, and everything the server says is decoded
defensively (`orchestrator.bench.safe`). `aiohttp` is imported here and in `connection`, which
are imported only on the bench code path (CLI start-up stays fast).
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import aiohttp

from orchestrator.bench.connection import (
    SMALL_READ_TIMEOUT_S,
    TRANSPORT_ERRORS,
    Attempt,
    Client,
    TooLarge,
    describe,
    get_small,
    nothing_received,
    read_capped,
)
from orchestrator.bench.safe import BadJson, decode_json, printable
from orchestrator.bench.workload import WorkItem
from orchestrator.errors import BenchError

Api = Literal["completions", "chat"]
Clock = Callable[[], float]
MAX_ERROR_BODY_BYTES: Final = 64 << 10
MAX_SSE_LINE_BYTES: Final = 1 << 20
"""Cap on one SSE line: a chunk carries a few tokens, a few hundred bytes."""
STREAM_BYTES_PER_TOKEN: Final = 16 << 10
"""Cap on a stream's bytes per requested token (plus one line): an OpenAI chunk is ~200-300
bytes, and the bench does not ask for logprobs."""
_ERROR_SHOWN_CHARS: Final = 300
"""Server text quoted in an error is cut here, always with printable's mark "…", so that the
redactor (orchestrator.bench.secrets) also hides a key the cut left only the start of."""
_MAX_MODEL_ID_CHARS: Final = 512
_JSON_HEADERS: Final = {"Content-Type": "application/json"}


@dataclass(frozen=True)
class Endpoint:
    """One arm of the A/B: where to send requests and how."""

    label: str
    base_url: str
    """Server root or its /v1 root; both are accepted."""
    model: str
    api: Api = "completions"
    api_key: str | None = field(default=None, repr=False)
    tls: ssl.SSLContext | None = field(default=None, repr=False, compare=False)
    """How to trust the server (and who the client is) over https: a cluster's API server, whose
    service proxy `tune --cluster` reaches each arm through. None: the system's defaults."""

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
    retried: bool = False
    """The first attempt failed before any response byte on a reused keep-alive connection
    (the server had closed it) and the request was sent again on a fresh connection."""
    usage_note: str | None = None
    """Why the server's `usage.completion_tokens` was not believed (the streamed chunks were
    counted instead), or None."""

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


def make_client(endpoint: Endpoint, concurrency: int, stall_s: float) -> Client:
    """An HTTP client for one arm: enough connections for the level, read timeout = stall.
    Call it inside the event loop that uses it."""
    return Client(endpoint.base_url, endpoint.api_key, concurrency, stall_s, endpoint.tls)


def request_body(
    endpoint: Endpoint,
    item: WorkItem,
    sampling: Sampling,
    max_tokens: int,
    *,
    prediction: bool = True,
) -> dict[str, Any]:
    """The JSON body for one streamed request (same for both arms but the model name, and the
    prediction when it goes to the candidate only)."""
    body: dict[str, Any] = {
        "model": endpoint.model,
        "max_tokens": item.max_tokens or max_tokens,
        "temperature": sampling.temperature,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if endpoint.api == "chat":
        body["messages"] = [{"role": m.role, "content": m.content} for m in item.messages]
        if prediction and item.prediction is not None:
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
    client: Client,
    endpoint: Endpoint,
    body: dict[str, Any],
    *,
    timeout_s: float,
    stall_s: float,
    level_start: float,
    clock: Clock = time.perf_counter,
    item: int = 0,
    due_s: float | None = None,
) -> RequestResult:
    """Send one streamed request and time it; failures come back as results, never raised.
    `timeout_s` bounds everything: connecting, sending, waiting and reading."""
    max_tokens = body.get("max_tokens")
    trace = _Trace(clock(), endpoint.api, max_tokens if isinstance(max_tokens, int) else 0)
    path = "/chat/completions" if endpoint.api == "chat" else "/completions"
    url = endpoint.api_root + path
    payload = json.dumps(body).encode()
    try:
        await asyncio.wait_for(_send(client, url, payload, trace, clock), timeout_s)
    except aiohttp.ServerTimeoutError as exc:  # before asyncio.TimeoutError, its base class
        if isinstance(exc, aiohttp.ConnectionTimeoutError):
            trace.fail(f"cannot connect to {endpoint.api_root} within {stall_s:g} s")
        else:
            trace.fail(f"stalled: no data for {stall_s:g} s after {trace.tokens} tokens")
    except asyncio.TimeoutError:
        trace.fail(f"timed out after {timeout_s:g} s ({trace.tokens} tokens received)")
    except aiohttp.ClientConnectorError as exc:
        trace.fail(f"cannot connect to {endpoint.api_root}: {exc.os_error.strerror or exc}")
    except TRANSPORT_ERRORS as exc:
        if trace.answered:
            trace.fail(f"connection failed mid-stream after {trace.tokens} tokens: {describe(exc)}")
        else:
            trace.fail(f"connection failed before an answer from {url}: {describe(exc)}")
    return trace.result(clock(), level_start, item, due_s)


async def _send(client: Client, url: str, payload: bytes, trace: _Trace, clock: Clock) -> None:
    """POST once; again on a fresh connection when a reused one was found closed before any
    response byte arrived (the server had dropped it while idle). Never after a response byte,
    and never when the failed connection was already fresh."""
    attempt = Attempt()
    try:
        response = await client.session.post(
            url, data=payload, headers=_JSON_HEADERS, trace_request_ctx=attempt
        )
    except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
        if not (attempt.reused and nothing_received(exc)):
            raise
        trace.retried = True
        trace.start = clock()  # the retry's own time: the dead connection cost the server nothing
        response = await client.fresh.post(url, data=payload, headers=_JSON_HEADERS)
    trace.answered = True
    async with response:
        await _read_stream(response, url, trace, clock)


@dataclass
class _Trace:
    start: float
    api: Api
    max_tokens: int
    first: float | None = None
    last: float | None = None
    gaps: list[float] = field(default_factory=list)
    chunks: int = 0
    usage_tokens: object = None
    """`usage.completion_tokens` exactly as the server sent it (checked in `result`)."""
    parts: list[str] = field(default_factory=list)
    done: bool = False
    finished: float | None = None
    """When [DONE] arrived; the request's end even if the connection lingers."""
    error: str | None = None
    retried: bool = False
    answered: bool = False
    """The response's status line and headers arrived."""

    @property
    def tokens(self) -> int:
        usage = self.usage_tokens
        if type(usage) is int and _believable(usage, self.chunks, self.max_tokens):
            return usage
        return self.chunks

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

    def result(
        self, end: float, level_start: float, item: int, due_s: float | None
    ) -> RequestResult:
        error = self.error
        if error is None and not self.done:
            error = "stream ended without [DONE]"
        if error is None and self.first is None:
            error = "the stream carried no generated text"
        return RequestResult(
            ok=error is None,
            error=None if error is None else printable(error, _ERROR_SHOWN_CHARS * 2),
            started_s=self.start - level_start,
            latency_s=(self.finished or end) - self.start,
            ttft_s=None if self.first is None else self.first - self.start,
            chunk_gaps_s=tuple(self.gaps),
            output_tokens=self.tokens,
            text="".join(self.parts),
            item=item,
            due_s=due_s,
            retried=self.retried,
            usage_note=self._usage_note(),
        )

    def _usage_note(self) -> str | None:
        usage = self.usage_tokens
        if usage is None or _believable(usage, self.chunks, self.max_tokens):
            return None
        shown = printable(repr(usage), 40)
        return (
            f"usage.completion_tokens={shown} but {self.chunks} chunks carried text "
            f"(max_tokens {self.max_tokens})"
        )


def _believable(usage: object, chunks: int, max_tokens: int) -> bool:
    """An honest count is an integer from the number of text chunks (each holds at least one
    token) up to the max_tokens asked for (when known)."""
    if type(usage) is not int or usage < chunks or usage < 0:
        return False
    return max_tokens <= 0 or usage <= max_tokens


async def _read_stream(
    response: aiohttp.ClientResponse, url: str, trace: _Trace, clock: Clock
) -> None:
    if response.status != 200:
        detail = (await read_capped(response, MAX_ERROR_BODY_BYTES, truncate=True)).decode(
            "utf-8", "replace"
        )
        shown = printable(detail, _ERROR_SHOWN_CHARS)
        trace.error = f"HTTP {response.status} from {url}: {shown}"
        return
    kind = response.headers.get("Content-Type", "")
    if "text/event-stream" not in kind:
        trace.error = f"not an OpenAI event stream (content-type {kind or 'missing'!r})"
        return
    budget = STREAM_BYTES_PER_TOKEN * max(trace.max_tokens, 1) + MAX_SSE_LINE_BYTES
    received = 0
    pending = b""
    async for data in response.content.iter_any():
        now = clock()
        lines = (pending + data).split(b"\n") if pending else data.split(b"\n")
        pending = lines.pop()
        if len(pending) > MAX_SSE_LINE_BYTES:
            trace.fail(f"not an OpenAI stream: a line runs over {MAX_SSE_LINE_BYTES} bytes")
            return
        received += len(data)
        if received > budget:
            trace.fail(f"flood: the stream sent over {budget} bytes for {trace.max_tokens} tokens")
            return
        if trace.done:
            continue  # after [DONE], read to the end so the connection is kept alive
        for line in lines:
            if line.startswith(b"data:") and _handle_event(line[5:].strip(), trace, now):
                if not trace.done:
                    return
                break
    if pending.startswith(b"data:") and not trace.done:  # a last line without its newline
        _handle_event(pending[5:].strip(), trace, clock())


def _handle_event(payload: bytes, trace: _Trace, now: float) -> bool:
    """Apply one SSE data payload; True when the stream is over (done or failed)."""
    if payload == b"[DONE]":
        trace.done, trace.finished = True, now
        return True
    try:
        event = decode_json(payload)
    except BadJson as exc:
        shown = printable(payload[:320].decode("utf-8", "replace"), 80)
        trace.error = f"not an OpenAI stream: event is not JSON ({exc}): {shown!r}"
        return True
    if not isinstance(event, dict) or "error" in event:
        err = event.get("error") if isinstance(event, dict) else event
        shown = printable(str(err), _ERROR_SHOWN_CHARS)
        trace.error = f"error event mid-stream after {trace.tokens} tokens: {shown}"
        return True
    usage = event.get("usage")
    if isinstance(usage, dict) and "completion_tokens" in usage:
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


async def resolve_model(
    client: Client, base_url: str, label: str, deadline_s: float = SMALL_READ_TIMEOUT_S
) -> str:
    """The first model id an endpoint serves (GET /v1/models), or a BenchError saying why not."""
    url = Endpoint(label, base_url, "").api_root + "/models"
    try:
        status, body = await get_small(client, url, deadline_s)
    except asyncio.TimeoutError:
        raise _unusable(label, url, f"no complete answer within {deadline_s:g} s") from None
    except TooLarge as exc:
        raise _unusable(label, url, str(exc)) from None
    except TRANSPORT_ERRORS as exc:
        raise _unusable(label, url, f"cannot connect ({describe(exc)})") from None
    try:
        document = decode_json(body) if status == 200 else None
    except BadJson:
        document = None
    data = document.get("data") if isinstance(document, dict) else None
    model = (
        data[0].get("id") if isinstance(data, list) and data and isinstance(data[0], dict) else None
    )
    if not isinstance(model, str) or not model or len(model) > _MAX_MODEL_ID_CHARS:
        problem = f"HTTP {status}, not an OpenAI model list (data[0].id, a string)"
        raise _unusable(label, url, problem)
    return model


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
