"""How many streamed requests/s the bench client sustains, and how well it times tokens.

A zero-delay loopback OpenAI-compatible server (tests/unit/bench/loopback.py, run in its own
process so it does not share the client's GIL) is driven, in the same run and at the same
concurrency, by:
  ours      specdeploy's bench client (orchestrator.bench.sweep, one arm-level)
  guidellm  GuideLLM (`guidellm run`, openai_http backend, concurrent profile), the reference
  aiohttp   a minimal aiohttp streaming loop, the floor of Python client overhead
Then, against a server that injects 50 ms before the first token and 20 ms per token, the
timing error of each client's mean TTFT and inter-token latency.

Run: python benchmarks/bench_client.py [--levels 1,8,32,64] [--requests-per-stream 25] [--rounds 3]
Prints ratios against the same-run reference (guidellm); absolute numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from orchestrator.bench.client import Endpoint  # noqa: E402
from orchestrator.bench.summary import summarize  # noqa: E402
from orchestrator.bench.sweep import SweepConfig, run_sweep  # noqa: E402
from orchestrator.bench.workload import load_workload  # noqa: E402

MAX_TOKENS = 16
FIRST_TOKEN_S, STEP_S = 0.050, 0.020
SERVER = """
import sys, time
sys.path.insert(0, {repo!r})
from tests.unit.bench.loopback import Behaviour, LoopbackServer
with LoopbackServer(Behaviour(first_token_delay={first}, step_delay=lambda a: {step})) as s:
    print(s.url, flush=True)
    sys.stdin.read()
"""


@contextmanager
def server(first: float = 0.0, step: float = 0.0) -> Iterator[str]:
    """A loopback server in a child process; stops when its stdin closes."""
    code = SERVER.format(repo=str(REPO), first=first, step=step)
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=10)


def ours(url: str, streams: int, requests: int) -> dict[str, float]:
    endpoint = Endpoint("candidate", url, "tiny-target")
    config = SweepConfig(
        concurrency=(streams,), requests=requests, max_tokens=MAX_TOKENS, scrape_metrics=False
    )
    record = run_sweep(
        endpoint, Endpoint("baseline", url, "tiny-target"), load_workload("chat"), config
    )
    arm = summarize(next(a for a in record.arms if a.label == "candidate"))
    return {
        "rps": arm.requests_per_s,
        "ok": arm.ok,
        "ttft_ms": arm.ttft_ms.mean or 0.0,
        "itl_ms": arm.itl_ms.mean or 0.0,
    }


def guidellm(url: str, streams: int, requests: int) -> dict[str, float] | None:
    exe = shutil.which("guidellm")
    if exe is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        data, out = Path(tmp) / "data.json", Path(tmp) / "out.json"
        rows = [
            {"prompt": f"hello {i}", "output_tokens_count": MAX_TOKENS} for i in range(requests)
        ]
        data.write_text(json.dumps(rows))
        argv = [
            exe,
            "run",
            "--backend",
            f"kind=openai_http,target={url},model=tiny-target",
            "--profile",
            f"kind=concurrent,streams={streams}",
            "--constraint",
            f"kind=max_requests,count={requests}",
            "--data",
            f"kind=json_file,path={data}",
            "--output",
            f"kind=json,path={out}",
            "--disable-console",
        ]
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin:" + str(Path(exe).parent)},
            check=False,
        )
        if done.returncode != 0 or not out.exists():
            print(f"guidellm failed: {done.stderr[-500:]}", file=sys.stderr)
            return None
        bench = json.loads(out.read_text())["benchmarks"][0]
    metrics = bench["metrics"]
    ok = metrics["request_totals"]["successful"]
    return {
        "rps": ok / bench["duration"],
        "ok": ok,
        "ttft_ms": metrics["time_to_first_token_ms"]["successful"]["mean"],
        "itl_ms": metrics["inter_token_latency_ms"]["successful"]["mean"],
    }


def aiohttp_loop(url: str, streams: int, requests: int) -> dict[str, float]:
    import aiohttp

    async def run() -> dict[str, float]:
        counter = iter(range(requests))
        ttfts: list[float] = []
        gaps: list[float] = []
        body = {"model": "tiny-target", "prompt": "hello", "max_tokens": MAX_TOKENS, "stream": True}

        async def worker(session: aiohttp.ClientSession) -> None:
            for _ in counter:
                start = last = time.perf_counter()
                first = True
                async with session.post(f"{url}/v1/completions", json=body) as response:
                    async for line in response.content:
                        if not line.startswith(b"data: {") or b'"text"' not in line:
                            continue
                        now = time.perf_counter()
                        (ttfts if first else gaps).append(now - (start if first else last))
                        first, last = False, now

        connector = aiohttp.TCPConnector(limit=streams + 2)
        async with aiohttp.ClientSession(connector=connector) as session:
            began = time.perf_counter()
            await asyncio.gather(*(worker(session) for _ in range(streams)))
            wall = time.perf_counter() - began
        return {
            "rps": len(ttfts) / wall,
            "ok": len(ttfts),
            "ttft_ms": 1000 * sum(ttfts) / len(ttfts),
            "itl_ms": 1000 * sum(gaps) / len(gaps),
        }

    return asyncio.run(run())


CLIENTS = {"ours": ours, "guidellm": guidellm, "aiohttp": aiohttp_loop}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default="1,8,32,64")
    parser.add_argument("--requests-per-stream", type=int, default=25)
    parser.add_argument("--rounds", type=int, default=3, help="median of this many runs")
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]

    print(
        "Throughput against a zero-delay loopback server "
        f"({MAX_TOKENS} streamed tokens per request); ratio = client / guidellm, same run"
    )
    print(
        f"{'streams':>7} | {'ours req/s':>10} | {'guidellm req/s':>14} | {'aiohttp req/s':>13} "
        f"| {'ours/guidellm':>13} | {'aiohttp/guidellm':>16}"
    )
    with server() as url:
        for streams in levels:
            n = max(100, streams * args.requests_per_stream)
            rounds = [
                {name: fn(url, streams, n) for name, fn in CLIENTS.items()}
                for _ in range(args.rounds)
            ]  # interleaved, so machine noise hits all
            print(_row(streams, _median(rounds)))

    print(
        f"\nTiming error vs injected delays (TTFT {FIRST_TOKEN_S * 1000:.0f} ms, "
        f"ITL {STEP_S * 1000:.0f} ms), concurrency 4, mean measured - injected"
    )
    print(
        f"{'client':>9} | {'TTFT ms':>8} | {'TTFT err ms':>11} | {'ITL ms':>7} | {'ITL err ms':>10}"
    )
    with server(FIRST_TOKEN_S, STEP_S) as url:
        for name, fn in CLIENTS.items():
            got = fn(url, 4, 40)
            if got is None:
                print(f"{name:>9} | unavailable")
                continue
            print(
                f"{name:>9} | {got['ttft_ms']:8.2f} | {got['ttft_ms'] - FIRST_TOKEN_S * 1000:11.2f} "
                f"| {got['itl_ms']:7.2f} | {got['itl_ms'] - STEP_S * 1000:10.2f}"
            )


def _median(rounds: list[dict[str, dict[str, float] | None]]) -> dict[str, dict[str, float] | None]:
    out: dict[str, dict[str, float] | None] = {}
    for name in rounds[0]:
        runs = [r[name] for r in rounds]
        valid = [r for r in runs if r is not None]
        out[name] = None if not valid else {"rps": statistics.median(r["rps"] for r in valid)}
    return out


def _row(streams: int, got: dict[str, dict[str, float] | None]) -> str:
    def rps(name: str) -> float | None:
        result = got[name]
        return None if result is None else result["rps"]

    ref = rps("guidellm")

    def ratio(name: str) -> str:
        value = rps(name)
        return "n/a" if value is None or not ref else f"{value / ref:.2f}"

    def show(name: str) -> str:
        value = rps(name)
        return "n/a" if value is None else f"{value:.0f}"

    return (
        f"{streams:>7} | {show('ours'):>10} | {show('guidellm'):>14} | {show('aiohttp'):>13} "
        f"| {ratio('ours'):>13} | {ratio('aiohttp'):>16}"
    )


if __name__ == "__main__":
    main()
