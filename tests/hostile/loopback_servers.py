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


def _echoes(authorization: str) -> str:
    """The Authorization value as is, URL-encoded and base64-encoded: how a careless server
    might echo it."""
    import base64
    from urllib.parse import quote

    encoded = base64.b64encode(authorization.encode()).decode()
    return f"{authorization} | {quote(authorization, safe='')} | {encoded}"


def _events(*events: object, done: bool = True) -> bytes:
    """A streamed completion body: the events as SSE data lines, then [DONE] when `done`."""
    import json

    body = b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events)
    return body + (b"data: [DONE]\n\n" if done else b"")


def _sse(texts: list[str]) -> bytes:
    chunks = [{"choices": [{"index": 0, "text": text}]} for text in texts]
    return _events(*chunks, {"choices": [], "usage": {"completion_tokens": len(texts)}})


class _OpenAIHandler(http.server.BaseHTTPRequestHandler):
    """A minimal OpenAI-compatible server (one model, streamed /v1/completions) whose answers
    to generation requests are given by the server's `answer(handler, number)`."""

    protocol_version = "HTTP/1.1"
    model = "m"

    def _reply(self, status: int, kind: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        import json

        if self.path.endswith("/models"):
            models = {"object": "list", "data": [{"id": self.model_id(), "object": "model"}]}
            self._reply(200, "application/json", json.dumps(models).encode())
        elif self.path == "/metrics":
            self._reply(200, "text/plain", b"")
        else:
            self._reply(404, "application/json", b'{"detail": "Not Found"}')

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        server = self.server
        with server.lock:  # type: ignore[attr-defined]
            server.posts += 1  # type: ignore[attr-defined]
            number = server.posts  # type: ignore[attr-defined]
        status, kind, body = server.answer(self, number)  # type: ignore[attr-defined]
        self._reply(status, kind, body)

    def model_id(self) -> str:
        return self.model

    @property
    def authorization(self) -> str:
        return self.headers.get("Authorization") or "(none)"

    def log_message(self, fmt: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def _openai_server(answer: object, handler: type[_OpenAIHandler] = _OpenAIHandler) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    server.answer = answer  # type: ignore[attr-defined]
    server.posts = 0  # type: ignore[attr-defined]
    server.lock = threading.Lock()  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def echo_auth_server() -> Iterator[str]:
    """An OpenAI-compatible server that echoes the Authorization header it receives (as is,
    URL-encoded and base64-encoded) everywhere it can: in the model id it lists, in every
    completion's text, and, for every second generation request after the first, in an error
    event mid-stream and (every fourth) in an HTTP 500 body padded so that a 300-character cut
    falls inside the key."""

    class Echo(_OpenAIHandler):
        def model_id(self) -> str:
            return f"echo {self.authorization}"

    def answer(handler: _OpenAIHandler, number: int) -> tuple[int, str, bytes]:
        echoed = _echoes(handler.authorization)
        if number > 1 and number % 4 == 0:
            # the quoted body is cut at 300 characters, inside a key of 16 characters or more
            padded = "p" * (300 - 12 - len(handler.authorization) // 2) + echoed
            return 500, "text/plain", padded.encode()
        if number > 1 and number % 2 == 1:
            error = {"error": {"message": f"refused: you sent {echoed}", "code": 403}}
            first = {"choices": [{"index": 0, "text": "you sent "}]}
            return 200, "text/event-stream", _events(first, error, done=False)
        return 200, "text/event-stream", _sse(["you ", "sent ", echoed, " ok"])

    with _openai_server(answer, Echo) as url:
        yield url


@contextlib.contextmanager
def unauthorized_server(key: str) -> Iterator[str]:
    """An OpenAI-compatible server that lists its model and answers every generation request
    with HTTP 401 and a body quoting `key` (OpenAI's wording), as is, URL-encoded and base64."""
    import json

    def answer(handler: _OpenAIHandler, number: int) -> tuple[int, str, bytes]:
        echoed = _echoes(handler.authorization)
        error = {
            "error": {
                "message": f"Incorrect API key provided: {key}. You sent {echoed}",
                "type": "invalid_request_error",
                "code": "invalid_api_key",
            }
        }
        return 401, "application/json", json.dumps(error).encode()

    with _openai_server(answer) as url:
        yield url
