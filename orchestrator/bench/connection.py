"""The HTTP layer under the bench client: one arm's connection pool (plus fresh connections for
retries), transport errors and their short description, and small reads (/v1/models, /metrics)
bounded by a total deadline and a byte cap."""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass
from types import SimpleNamespace, TracebackType
from typing import Any, Final
from urllib.parse import urlsplit

import aiohttp
from aiohttp.http_exceptions import HttpProcessingError

from orchestrator.bench.safe import printable

_LOOPBACK: Final = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})

KEEPALIVE_S: Final = 4.0
"""Idle keep-alive connections are dropped after this long, below the servers' own idle timeout
(vLLM: uvicorn's 5 s, https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/envs.py#L1143-L1145),
so a connection the server is about to close is rarely reused; `stream_request` retries the rest."""
SMALL_READ_TIMEOUT_S: Final = 10.0
"""Total deadline of a /v1/models or /metrics read (capped by --timeout); a healthy server
answers them in milliseconds."""
MAX_SMALL_BODY_BYTES: Final = 16 << 20
"""Cap on a /v1/models or /metrics body (a hub's whole model list is ~1 MB)."""
TRANSPORT_ERRORS: Final = (aiohttp.ClientError, HttpProcessingError, OSError)
"""What a broken connection or a malformed HTTP message raises (aiohttp reports a parse error
in a body as its HttpProcessingError, which is not a ClientError)."""


class Client:
    """One arm's HTTP client: a pool of keep-alive connections for the level, and fresh
    one-shot connections for the retry of a request whose reused connection the server closed."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        concurrency: int,
        stall_s: float,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        local = (urlsplit(base_url).hostname or "") in _LOOPBACK
        # A read that waits longer than the stall timeout is a stall; a connection that takes
        # longer than that to open counts as unreachable (each request also has a total deadline).
        timeout = aiohttp.ClientTimeout(total=None, sock_read=stall_s, sock_connect=stall_s)
        tracing = aiohttp.TraceConfig()
        tracing.on_connection_reuseconn.append(_mark_reused)
        self._settings: dict[str, Any] = {
            "headers": headers,
            "timeout": timeout,
            "trust_env": not local,  # never route loopback through a proxy from the environment
        }
        self._tls: ssl.SSLContext | bool = tls if tls is not None else True
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(
                limit=concurrency + 2, keepalive_timeout=KEEPALIVE_S, ssl=self._tls
            ),
            trace_configs=[tracing],
            **self._settings,
        )
        self._fresh: aiohttp.ClientSession | None = None

    @property
    def fresh(self) -> aiohttp.ClientSession:
        """A session whose every request opens, and then closes, its own connection."""
        if self._fresh is None:
            connector = aiohttp.TCPConnector(force_close=True, limit=0, ssl=self._tls)
            self._fresh = aiohttp.ClientSession(connector=connector, **self._settings)
        return self._fresh

    async def aclose(self) -> None:
        await self.session.close()
        if self._fresh is not None:
            await self._fresh.close()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


async def _mark_reused(
    _session: aiohttp.ClientSession, context: SimpleNamespace, _params: object
) -> None:
    mark = context.trace_request_ctx
    if isinstance(mark, Attempt):
        mark.reused = True


@dataclass
class Attempt:
    reused: bool = False


def describe(exc: BaseException) -> str:
    """A short, printable account of a transport error (aiohttp's reprs carry whole requests)."""
    message = getattr(exc, "message", None) or str(exc) or "no detail"
    return printable(f"{type(exc).__name__}: {message}", 200)


def nothing_received(exc: aiohttp.ClientError) -> bool:
    """The exchange failed before any byte of a response was parsed: a clean close with no
    partial message, or a reset / broken pipe while sending or waiting."""
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return exc.message in (None, "Server disconnected")
    return isinstance(exc, aiohttp.ClientOSError)


class TooLarge(Exception):
    """A response body ran over its byte cap."""


async def read_capped(
    response: aiohttp.ClientResponse, cap: int, *, truncate: bool = False
) -> bytes:
    """The body, at most `cap` bytes: TooLarge beyond that, or the first `cap` bytes when
    `truncate` (the connection is then dropped, not reused)."""
    blocks: list[bytes] = []
    size = 0
    async for block in response.content.iter_any():
        size += len(block)
        blocks.append(block)
        if size > cap:
            response.close()
            if truncate:
                return b"".join(blocks)[:cap]
            raise TooLarge(f"the body runs over {cap} bytes")
    return b"".join(blocks)


async def get_small(client: Client, url: str, deadline_s: float) -> tuple[int, bytes]:
    """GET a small document (status, body) within a total deadline and a byte cap; raises
    asyncio.TimeoutError, TooLarge, or one of TRANSPORT_ERRORS."""

    async def get() -> tuple[int, bytes]:
        async with client.session.get(url) as response:
            return response.status, await read_capped(response, MAX_SMALL_BODY_BYTES)

    return await asyncio.wait_for(get(), deadline_s)
