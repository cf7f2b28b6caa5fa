"""`specdeploy bench` holds credentials (issue 19 §3): the API key it sends as "Bearer KEY", and
passwords in the endpoint URLs. Servers echo what they are sent, so the key must appear in no
output: not on stdout or stderr, not in bench.json, bench.md or bench.png, in no spelling (as is,
URL-encoded, base64), even cut short by a truncation. And SIGTERM keeps the levels already
measured, as SIGINT does.

Every run is the real CLI in a child process under a memory cap and a deadline, with an empty
working directory, and nothing outside the named output directory may change.
"""

from __future__ import annotations

import base64
import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest

from orchestrator.cli.bench_cmd import EXIT_INTERRUPTED
from tests.hostile.capped_cli import Run, specdeploy
from tests.hostile.loopback_servers import echo_auth_server, unauthorized_server
from tests.support import REPO_ROOT
from tests.unit.bench.loopback import Behaviour, LoopbackServer

#: A key with characters that URL-encoding, JSON and Markdown each spell differently; no known
#: token prefix, so only the bench's own redaction can hide it.
LONG_KEY = "team_Key+with/odd=chars*0123456789abcdef"
#: Shorter than the redactor's 8 characters: hidden only where it stands alone.
SHORT_KEY = "k3Y"
#: Generous: a loaded CI machine needs seconds to start Python and import the bench code.
DEADLINE_S = 120.0


def _spellings(secret: str) -> set[str]:
    """How the secret could leak: as is, URL-encoded, and base64 (alone and in the header)."""
    found = {secret, quote(secret, safe=""), quote_plus(secret)}
    if len(secret) >= 8:
        for value in (secret, f"Bearer {secret}"):
            found.add(base64.b64encode(value.encode()).decode().rstrip("="))
        found.add(secret[:12])  # the start of a key cut off by a truncation
    return found


def _snapshot(root: Path, skip: Path) -> dict[str, tuple[int, int]]:
    """(size, mtime) of every file under `root` outside `skip`."""
    return {
        str(path.relative_to(root)): (path.stat().st_size, path.stat().st_mtime_ns)
        for path in sorted(root.rglob("*"))
        if path.is_file() and skip not in path.parents
    }


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _png_metadata(data: bytes) -> bytes:
    """Every chunk of a PNG but its pixels, with compressed text inflated: where a writer could
    put a string. The compressed pixel data (IDAT) is left out because a 3-byte key turns up in
    100 KB of deflate output by chance (about 1 run in 150); a key drawn into the image is not
    a byte string there at all."""
    assert data.startswith(PNG_SIGNATURE), "not a PNG"
    found, at = [], len(PNG_SIGNATURE)
    while at + 8 <= len(data):
        length = int.from_bytes(data[at : at + 4], "big")
        kind, body = data[at + 4 : at + 8], data[at + 8 : at + 8 + length]
        at += 12 + length
        if kind == b"IDAT":
            continue
        found.append(body)
        if kind == b"zTXt":
            found.append(zlib.decompress(body.split(b"\0", 1)[1][1:]))
        elif kind == b"iTXt":
            _keyword, rest = body.split(b"\0", 1)
            if rest[0] == 1:  # compressed: flag, method, language\0, translated keyword\0, text
                found.append(zlib.decompress(rest[2:].split(b"\0", 2)[2]))
    assert at == len(data), "a truncated PNG"
    return b"\n".join(found)


def _outputs(run: Run, out: Path) -> dict[str, bytes]:
    """Everything the run showed or wrote: stdout, stderr and each file under `out` (of a PNG,
    the chunks that can hold text)."""
    found = {"stdout": run.stdout.encode(), "stderr": run.stderr.encode()}
    if out.exists():
        for path in sorted(out.rglob("*")):
            if path.is_file():
                data = path.read_bytes()
                found[str(path)] = _png_metadata(data) if path.suffix == ".png" else data
    return found


def _assert_hidden(secret: str, outputs: dict[str, bytes]) -> None:
    for name, data in outputs.items():
        for spelling in _spellings(secret):
            assert spelling.encode() not in data, (spelling, name, data[:4000])


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(empty working directory, output directory); checks afterwards that nothing but the
    output directory changed under tmp_path."""
    cwd, out = tmp_path / "cwd", tmp_path / "out"
    cwd.mkdir()
    (tmp_path / "bystander.txt").write_text("keep me\n")
    before = _snapshot(tmp_path, out)
    yield cwd, out
    assert _snapshot(tmp_path, out) == before
    assert list(cwd.iterdir()) == []


def _bench(url: str, out: Path, cwd: Path, key: str, *extra: str) -> Run:
    return specdeploy(
        "bench", "--candidate", url, "--baseline", url, "--concurrency", "1", "--requests", "8",
        "--max-tokens", "4", "--timeout", "30", "--stall-timeout", "20",
        "--api-key-env", "BENCH_KEY", "--out", str(out), *extra,
        env={"BENCH_KEY": key}, cwd=cwd, time_limit=DEADLINE_S,
    )  # fmt: skip


@pytest.mark.parametrize("key", [LONG_KEY, SHORT_KEY], ids=["long-key", "short-key"])
def test_an_endpoint_echoing_the_key_gets_it_into_no_output(
    sandbox: tuple[Path, Path], key: str
) -> None:
    cwd, out = sandbox
    with echo_auth_server() as url:
        run = _bench(url, out, cwd, key)
    # half the requests fail with the echo in their error: the measurement still stands
    assert run.returncode == 0, run.output
    assert "warning (failed-requests)" in run.stderr
    assert "[redacted]" in run.stderr
    outputs = _outputs(run, out)
    assert {Path(name).name for name in outputs} >= {"bench.json", "bench.md", "bench.png"}
    assert b"[redacted]" in outputs[str(out / "bench.json")]
    assert b"[redacted]" in outputs[str(out / "bench.md")]
    _assert_hidden(key, outputs)


def test_the_redacted_json_is_still_the_report(sandbox: tuple[Path, Path]) -> None:
    import json

    cwd, out = sandbox
    with echo_auth_server() as url:
        run = _bench(url, out, cwd, LONG_KEY)
    assert run.returncode == 0, run.output
    document = json.loads((out / "bench.json").read_text())
    assert document["candidate"]["model"] == "echo [redacted]"
    causes = [e["cause"] for e in document["levels"][0]["candidate"]["errors"]]
    assert causes and all("[redacted]" in cause for cause in causes), causes


@pytest.mark.parametrize("key", [LONG_KEY, SHORT_KEY], ids=["long-key", "short-key"])
def test_a_401_quoting_the_key_is_exit_7_without_the_key(
    sandbox: tuple[Path, Path], key: str
) -> None:
    cwd, out = sandbox
    with unauthorized_server(key) as url:
        run = _bench(url, out, cwd, key)
    assert run.returncode == 7, run.output
    assert "probe request failed: HTTP 401" in run.stderr
    assert "Incorrect API key provided: [redacted]" in run.stderr
    assert "fix:" in run.stderr
    _assert_hidden(key, _outputs(run, out))


def _chunk(kind: bytes, body: bytes) -> bytes:
    crc = zlib.crc32(kind + body).to_bytes(4, "big")
    return len(body).to_bytes(4, "big") + kind + body + crc


def test_the_png_scan_finds_a_key_in_any_text_chunk_but_not_in_pixels() -> None:
    """The scan above is not vacuous: a key in plain, compressed or international text is
    found; the same bytes inside pixel data are not."""
    header = _chunk(b"IHDR", bytes(13))
    for text in (
        _chunk(b"tEXt", b"Title\0" + SHORT_KEY.encode()),
        _chunk(b"zTXt", b"Title\0\0" + zlib.compress(SHORT_KEY.encode())),
        _chunk(b"iTXt", b"Title\0\1\0en\0\0" + zlib.compress(SHORT_KEY.encode())),
        _chunk(b"iTXt", b"Title\0\0\0\0\0" + SHORT_KEY.encode()),
    ):
        png = PNG_SIGNATURE + header + text + _chunk(b"IEND", b"")
        assert SHORT_KEY.encode() in _png_metadata(png), text
    pixels = PNG_SIGNATURE + header + _chunk(b"IDAT", SHORT_KEY.encode()) + _chunk(b"IEND", b"")
    assert SHORT_KEY.encode() not in _png_metadata(pixels)


def test_a_password_in_the_endpoint_url_is_redacted(sandbox: tuple[Path, Path]) -> None:
    cwd, out = sandbox
    password = "url-Pass%2Fword-0042"
    with unauthorized_server(password) as url:
        credentialed = url.replace("http://", f"http://robot:{password}@")
        run = specdeploy(
            "bench", "--candidate", credentialed, "--baseline", credentialed, "--model", "m",
            "--concurrency", "1", "--requests", "1", "--max-tokens", "2", "--out", str(out),
            cwd=cwd, time_limit=DEADLINE_S,
        )  # fmt: skip
    assert run.returncode == 7, run.output
    assert "robot:[redacted]@127.0.0.1" in run.stderr
    _assert_hidden(password, _outputs(run, out))
    _assert_hidden("url-Pass/word-0042", _outputs(run, out))


# --- SIGTERM ---------------------------------------------------------------------------------

SIGNALS = {"SIGINT": signal.SIGINT, "SIGTERM": signal.SIGTERM}
#: What each signal says on stderr when the sweep stops.
STOP_LINES = {"SIGINT": "interrupted: keeping", "SIGTERM": "terminated (SIGTERM): keeping"}


def _cap_memory() -> None:
    import resource

    from tests.hostile.capped_cli import MEMORY_CAP_BYTES

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP_BYTES, MEMORY_CAP_BYTES))


def _lines(stream: object, into: queue.Queue[str]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        into.put(line)


@pytest.mark.parametrize("name", sorted(SIGNALS))
def test_a_signal_mid_sweep_keeps_the_measured_levels(
    sandbox: tuple[Path, Path], name: str
) -> None:
    """SIGINT and SIGTERM sent after the first arm-level was measured: both exit 130 with the
    measured level in bench.json and bench.md."""
    cwd, out = sandbox
    # ~0.4 s per token, 4 tokens, 3 requests: seconds per arm-level and over 15 s of sweep after
    # the first, so the signal lands mid-sweep however late a loaded machine delivers it (no
    # timing is asserted)
    slow = Behaviour(step_delay=lambda active: 0.4)
    with LoopbackServer(slow) as server:
        args = [
            "bench", "--candidate", server.url, "--baseline", server.url,
            "--concurrency", "1,2,3,4", "--requests", "3", "--max-tokens", "4",
            "--api-key-env", "BENCH_KEY", "--out", str(out),
        ]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1"}
        child = subprocess.Popen(
            [sys.executable, "-m", "orchestrator", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=cwd,
            env={**env, "BENCH_KEY": LONG_KEY},
            preexec_fn=_cap_memory,
        )
        stderr: list[str] = []
        lines: queue.Queue[str] = queue.Queue()
        reader = threading.Thread(target=_lines, args=(child.stderr, lines), daemon=True)
        reader.start()
        try:
            deadline = time.monotonic() + DEADLINE_S
            while not any(line.startswith("concurrency") for line in stderr):
                assert child.poll() is None, "".join(stderr)
                assert time.monotonic() < deadline, "no level measured: " + "".join(stderr)
                with contextlib.suppress(queue.Empty):
                    stderr.append(lines.get(timeout=1))
            child.send_signal(SIGNALS[name])
            child.wait(timeout=DEADLINE_S)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        reader.join(timeout=10)
        stderr += [lines.get() for _ in range(lines.qsize())]
        assert child.stdout is not None
        stdout = child.stdout.read()
        child.stdout.close()
    shown = stdout + "".join(stderr)
    assert child.returncode == EXIT_INTERRUPTED, shown
    assert "Traceback" not in shown and STOP_LINES[name] in shown, shown
    assert "bench.json" in stdout, shown

    import json

    document = json.loads((out / "bench.json").read_text())
    assert document["interrupted"] is True
    first = document["levels"][0]
    assert first["concurrency"] == 1
    assert first["candidate"]["complete"] is True and first["candidate"]["ok"] == 3
    assert "interrupted: partial results" in (out / "bench.md").read_text()
    _assert_hidden(LONG_KEY, {"stdout": stdout.encode(), "stderr": "".join(stderr).encode()})


def test_a_key_and_a_url_password_together_are_a_usage_error(sandbox: tuple[Path, Path]) -> None:
    cwd, out = sandbox
    password = "url-Pass-word-0042"
    with echo_auth_server() as url:
        credentialed = url.replace("http://", f"http://robot:{password}@")
        run = _bench(credentialed, out, cwd, LONG_KEY)
    assert run.returncode == 2, run.output
    assert "--candidate: the URL carries credentials" in run.stderr
    assert not out.exists()
    _assert_hidden(password, _outputs(run, out))
    _assert_hidden(LONG_KEY, _outputs(run, out))
