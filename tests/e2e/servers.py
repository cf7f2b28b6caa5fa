"""Real engine servers on loopback for end-to-end tests, plus small OpenAI/Prometheus helpers.

`vllm_server(args, tmp_path=...)` starts `vllm serve ARGS` from the referee venv (.venv-vllm/) on
127.0.0.1 and a free port, offline, with every cache inside `tmp_path`, waits for /health and
yields the base URL; SIGTERM (then SIGKILL) in `finally`. Settings from
shared/reference/feasibility_vllm.md §5: VLLM_CPU_KVCACHE_SPACE=1 (GiB) keeps a server near 3 GB.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator.bench.metrics import parse_prometheus
from orchestrator.engines.metrics import Samples
from orchestrator.runner.local import stop
from tests.support import REPO_ROOT

VLLM_VENV = REPO_ROOT / ".venv-vllm"
VLLM_PYTHON = VLLM_VENV / "bin" / "python"
VLLM_BIN = VLLM_VENV / "bin" / "vllm"
READY_TIMEOUT = 300.0
STOP_TIMEOUT = 30.0


def require_vllm() -> None:
    """Skip the calling test when the vLLM referee venv is not installed."""
    if not VLLM_BIN.exists():
        pytest.skip(f"vLLM venv {VLLM_VENV} is missing; run .ci/install-referees.sh vllm")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def server_env(tmp_path: Path) -> dict[str, str]:
    """Offline, small KV cache, vLLM's caches inside tmp_path. TMPDIR (where vLLM puts its ZeroMQ
    IPC sockets) is a short new directory: socket paths must fit in 107 bytes."""
    scratch = tmp_path / "engine-cache"
    scratch.mkdir(parents=True, exist_ok=True)
    return {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "VLLM_CACHE_ROOT": str(scratch / "vllm-cache"),
        "TMPDIR": tempfile.mkdtemp(prefix="sd-"),
    }


@contextlib.contextmanager
def vllm_server(
    args: list[str], *, tmp_path: Path, timeout: float = READY_TIMEOUT
) -> Iterator[str]:
    """`vllm serve *args` on 127.0.0.1:<free port>; yields "http://127.0.0.1:<port>".
    `args` starts with the model and must not set --host or --port."""
    require_vllm()
    port = free_port()
    tmp_path.mkdir(parents=True, exist_ok=True)
    log_path = tmp_path / f"vllm-{port}.log"
    argv = [str(VLLM_BIN), "serve", *args, "--host", "127.0.0.1", "--port", str(port)]
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            argv,
            env=server_env(tmp_path),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            wait_healthy(process, url, log_path, timeout)
            yield url
        finally:
            stop(process, STOP_TIMEOUT)


def wait_healthy(
    process: subprocess.Popen[bytes], url: str, log_path: Path, timeout: float
) -> None:
    """Poll /health until 200; fail the test with the log's end if the server dies or stalls."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"server exited with {process.returncode}:\n{log_tail(log_path)}")
        with (
            contextlib.suppress(urllib.error.URLError, OSError),
            urllib.request.urlopen(f"{url}/health", timeout=2) as response,
        ):
            if response.status == 200:
                return
        time.sleep(1)
    pytest.fail(f"server not healthy after {timeout:.0f} s:\n{log_tail(log_path)}")


def log_tail(path: Path, lines: int = 40) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.load(response)


def served_model(url: str) -> str:
    """The id of the (only) model the server serves."""
    model: str = get_json(f"{url}/v1/models")["data"][0]["id"]
    return model


def complete(url: str, prompt: str, *, max_tokens: int = 24) -> str:
    """Greedy /v1/completions text (temperature 0, no early stop)."""
    body = {
        "model": served_model(url),
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": 0,
        "ignore_eos": True,
    }
    request = urllib.request.Request(
        f"{url}/v1/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        text: str = json.load(response)["choices"][0]["text"]
        return text


def scrape(url: str) -> Samples:
    """The server's /metrics, parsed as the operator and bench parse them."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=30) as response:
        return parse_prometheus(response.read(1 << 24).decode(), by_label="position")


def spec_counters(url: str) -> dict[str, float]:
    """vLLM's speculative-decoding counters from /metrics, summed over label sets, by the name
    without the `vllm:spec_decode_` prefix and `_total` suffix (e.g. "num_draft_tokens")."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=30) as response:
        text = response.read().decode()
    counters: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith("vllm:spec_decode_") or "_per_pos" in line:
            continue
        name_labels, value = line.rsplit(" ", 1)
        name = name_labels.split("{", 1)[0]
        if not name.endswith("_total"):
            continue
        key = name.removeprefix("vllm:spec_decode_").removesuffix("_total")
        counters[key] = counters.get(key, 0.0) + float(value)
    return counters
