"""How many streamed chunks/s the bench client sustains, and how well it times tokens.

A zero-delay loopback OpenAI-compatible server (tests/unit/bench/loopback.py, run in its own
process so it does not share the client's GIL) is driven, in the same run and at the same
concurrency, by:
  ours      specdeploy's bench client (orchestrator.bench.sweep, one arm-level per arm)
  aiohttp   a minimal aiohttp streaming loop: the floor of Python client overhead
  guidellm  GuideLLM (`guidellm run`, openai_http backend, concurrent profile), the reference
            tool, when installed (on PATH, in .venv-guidellm/, or --guidellm PATH)
Then, against a server that injects 50 ms before the first token and 20 ms per token, each
client's mean TTFT and inter-token latency (ITL), against the injected delays and, for ITL,
against the gaps the server really left between chunks (its sleeps overshoot under load; it
reports them at /metrics): that last difference is the client's own timing error.

Goal (issue 15): ours >= 0.8x the aiohttp floor's chunk throughput at 64 and 256 streams, and
ITL error <= 1 ms.

Run: python benchmarks/bench_client.py [--levels 64,256] [--requests-per-stream 10] [--rounds 3]
Tiny (a smoke test): --levels 4 --min-requests 8 --rounds 1 --timing-requests 4 --no-guidellm
Prints ratios against the same-run floor (and GuideLLM); absolute numbers depend on the machine.
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
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from orchestrator.bench.client import Endpoint  # noqa: E402
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
Measured = dict[str, float]
Client = Callable[[str, int, int], "Measured | None"]


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


def ours(url: str, streams: int, requests: int) -> Measured:
    """Both arms of one level (the same server); chunks/s over both arms' wall time."""
    config = SweepConfig(
        concurrency=(streams,), requests=requests, max_tokens=MAX_TOKENS, scrape_metrics=False
    )
    endpoints = (
        Endpoint("candidate", url, "tiny-target"),
        Endpoint("baseline", url, "tiny-target"),
    )
    record = run_sweep(*endpoints, load_workload("chat"), config)
    ok = [r for arm in record.arms for r in arm.results if r.ok]
    wall = sum(arm.wall_s for arm in record.arms)
    return {
        "chunks_per_s": sum(len(r.chunk_gaps_s) + 1 for r in ok) / wall,
        "ok": len(ok),
        "ttft_ms": 1000 * statistics.fmean(r.ttft_s or 0.0 for r in ok),
        "itl_ms": 1000 * statistics.fmean(g for r in ok for g in r.chunk_gaps_s),
    }


def aiohttp_loop(url: str, streams: int, requests: int) -> Measured:
    import aiohttp

    async def run() -> Measured:
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
            "chunks_per_s": (len(ttfts) + len(gaps)) / wall,
            "ok": len(ttfts),
            "ttft_ms": 1000 * sum(ttfts) / len(ttfts),
            "itl_ms": 1000 * sum(gaps) / len(gaps),
        }

    return asyncio.run(run())


def guidellm_client(exe: str | None) -> Client:
    def guidellm(url: str, streams: int, requests: int) -> Measured | None:
        return None if exe is None else _guidellm(exe, url, streams, requests)

    return guidellm


def _guidellm(exe: str, url: str, streams: int, requests: int) -> Measured | None:
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
        # the loopback server streams MAX_TOKENS one-token chunks per request
        "chunks_per_s": ok * MAX_TOKENS / bench["duration"],
        "ok": ok,
        "ttft_ms": metrics["time_to_first_token_ms"]["successful"]["mean"],
        "itl_ms": metrics["inter_token_latency_ms"]["successful"]["mean"],
    }


def find_guidellm(given: str | None, disabled: bool) -> str | None:
    if disabled:
        return None
    if given:
        return given
    local = REPO / ".venv-guidellm" / "bin" / "guidellm"
    return shutil.which("guidellm") or (str(local) if local.exists() else None)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--levels", default="64,256", help="concurrent streams, comma-separated")
    parser.add_argument("--requests-per-stream", type=int, default=10)
    parser.add_argument("--min-requests", type=int, default=100, help="per client and level")
    parser.add_argument("--rounds", type=int, default=3, help="median of this many runs")
    parser.add_argument("--timing-requests", type=int, default=80, help="for the timing error")
    parser.add_argument("--guidellm", default=None, metavar="PATH", help="guidellm executable")
    parser.add_argument("--no-guidellm", action="store_true", help="skip GuideLLM (slow start)")
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    exe = find_guidellm(args.guidellm, args.no_guidellm)
    clients: dict[str, Client] = {
        "ours": ours,
        "aiohttp": aiohttp_loop,
        "guidellm": guidellm_client(exe),
    }
    print(f"guidellm: {exe or 'not used (not installed, or --no-guidellm)'}")
    print(
        f"Chunk throughput against a zero-delay loopback server ({MAX_TOKENS} one-token chunks "
        f"per request), median of {args.rounds}; ratios in the same run (goal: ours/aiohttp >= 0.8)"
    )
    print(
        f"{'streams':>7} | {'ours chunk/s':>12} | {'aiohttp chunk/s':>15} | "
        f"{'guidellm chunk/s':>16} | {'ours/aiohttp':>12} | {'ours/guidellm':>13}"
    )
    with server() as url:
        for streams in levels:
            n = max(args.min_requests, streams * args.requests_per_stream)
            rounds = [
                {name: fn(url, streams, n) for name, fn in clients.items()}
                for _ in range(args.rounds)
            ]  # interleaved, so machine noise hits all
            print(_row(streams, _median(rounds)))

    print(
        f"\nTiming vs injected delays (TTFT {FIRST_TOKEN_S * 1000:.0f} ms, "
        f"ITL {STEP_S * 1000:.0f} ms), 4 streams, {args.timing_requests} requests; ITL error = "
        "client's mean - the server's real mean gap (goal: ours <= 1 ms)"
    )
    print(
        f"{'client':>9} | {'TTFT ms':>8} | {'TTFT - injected':>15} | {'ITL ms':>7} | "
        f"{'ITL - injected':>14} | {'server gap ms':>13} | {'ITL error ms':>12}"
    )
    with server(FIRST_TOKEN_S, STEP_S) as url:
        for name, fn in clients.items():
            before = server_gaps(url)
            got = fn(url, 4, args.timing_requests)
            after = server_gaps(url)
            if got is None:
                print(f"{name:>9} | unavailable")
                continue
            gap_ms = 1000 * (after[0] - before[0]) / max(1, after[1] - before[1])
            print(
                f"{name:>9} | {got['ttft_ms']:8.2f} | {got['ttft_ms'] - FIRST_TOKEN_S * 1000:15.2f} "
                f"| {got['itl_ms']:7.2f} | {got['itl_ms'] - STEP_S * 1000:14.2f} | {gap_ms:13.2f} "
                f"| {got['itl_ms'] - gap_ms:12.2f}"
            )


def server_gaps(url: str) -> tuple[float, int]:
    """(sum of seconds, count) of the gaps the loopback server left between content chunks."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        text = response.read().decode()
    values = dict(line.split(" ", 1) for line in text.splitlines() if line.startswith("loopback_"))
    return float(values["loopback_chunk_gap_seconds_sum"]), int(
        values["loopback_chunk_gap_seconds_count"]
    )


def _median(rounds: list[dict[str, Measured | None]]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for name in rounds[0]:
        valid = [r[name] for r in rounds if r[name] is not None]
        out[name] = statistics.median(r["chunks_per_s"] for r in valid if r) if valid else None
    return out


def _row(streams: int, got: dict[str, float | None]) -> str:
    def show(name: str) -> str:
        value = got[name]
        return "n/a" if value is None else f"{value:.0f}"

    def ratio(name: str) -> str:
        value, ref = got["ours"], got[name]
        return "n/a" if value is None or not ref else f"{value / ref:.2f}"

    return (
        f"{streams:>7} | {show('ours'):>12} | {show('aiohttp'):>15} | {show('guidellm'):>16} "
        f"| {ratio('aiohttp'):>12} | {ratio('guidellm'):>13}"
    )


if __name__ == "__main__":
    main()
