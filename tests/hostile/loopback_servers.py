"""Loopback servers that misbehave on purpose: one that accepts connections and never answers,
and one that answers every request with a fixed HTTP status. Tests point clients at them instead of
a real hub, so nothing leaves the machine."""

from __future__ import annotations

import contextlib
import http.server
import socket
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def silent_server() -> Iterator[str]:
    """http://127.0.0.1:PORT of a server that accepts every connection and never sends a byte."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            with contextlib.suppress(OSError):
                held.append(listener.accept()[0])  # keep it open, say nothing

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(2)
        for connection in held:
            connection.close()
        listener.close()


@contextlib.contextmanager
def status_server(status: int) -> Iterator[tuple[str, list[str]]]:
    """(url, paths requested) of a server that answers every request with `status`."""
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            seen.append(f"{self.command} {self.path}")
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_HEAD = _answer

        def log_message(self, fmt: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def answers_once_server() -> Iterator[str]:
    """http://127.0.0.1:PORT of a server that answers the first request (200, empty) and then
    accepts every later connection without a byte: a hub that passes a reachability check and
    then stalls the downloads."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        answered = False
        while not stop.is_set():
            try:
                connection = listener.accept()[0]
            except OSError:
                continue
            held.append(connection)
            if not answered:
                answered = True
                connection.recv(65536)
                connection.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                )

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(2)
        for connection in held:
            connection.close()
        listener.close()
