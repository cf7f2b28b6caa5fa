"""Fixtures for bench tests: loopback OpenAI-compatible servers with injected behaviour."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from contextlib import ExitStack

import pytest

from tests.unit.bench.loopback import Behaviour, LoopbackServer

StartServer = Callable[..., LoopbackServer]


@pytest.fixture
def start_server() -> Iterator[StartServer]:
    """Start loopback servers (keyword arguments are `Behaviour` fields); all stop at teardown."""
    with ExitStack() as stack:

        def start(**behaviour: object) -> LoopbackServer:
            return stack.enter_context(LoopbackServer(Behaviour(**behaviour)))  # type: ignore[arg-type]

        yield start


@pytest.fixture
def closed_port_url() -> str:
    """A loopback URL where nothing listens."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"
