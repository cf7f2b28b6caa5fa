"""bench: speculative vs baseline on live OpenAI-compatible endpoints, swept over load
(concurrency, or open-loop request rates).

Exit codes: 0 measured, 7 endpoints unusable, 130 interrupted by SIGINT or SIGTERM (reports keep
what was measured). Every credential bench holds is redacted from all it shows and writes
(orchestrator.bench.secrets).
The bench code (aiohttp, matplotlib) is imported inside the command, so CLI start-up stays fast.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import click

from orchestrator.cli.options import offline_option, profile_argument
from orchestrator.errors import BenchError

if TYPE_CHECKING:
    from orchestrator.bench.summary import ArmSummary
    from orchestrator.engines.base import EngineLaunch

EXIT_INTERRUPTED = 130  # the shell's convention for SIGINT; SIGTERM stops the same way


def _levels(_ctx: click.Context, _param: click.Parameter, value: str) -> tuple[int, ...]:
    try:
        levels = tuple(sorted({int(part) for part in value.split(",") if part.strip()}))
    except ValueError:
        levels = ()
    if not levels or levels[0] < 1:
        raise click.BadParameter(
            f"{value!r}: give positive integers separated by commas, e.g. 1,4,16"
        )
    return levels


def _rates(_ctx: click.Context, _param: click.Parameter, value: str | None) -> tuple[float, ...]:
    if value is None:
        return ()
    try:
        rates = tuple(sorted({float(part) for part in value.split(",") if part.strip()}))
    except ValueError:
        rates = ()
    if not rates or rates[0] <= 0 or not all(math.isfinite(r) for r in rates):
        raise click.BadParameter(
            f"{value!r}: give positive request rates (requests/s) separated by commas, e.g. 0.5,2,8"
        )
    return rates


@click.command()
@click.argument("profile", required=False, type=profile_argument)
@click.option("--candidate", "candidate_url", metavar="URL", help="Speculative endpoint root URL.")
@click.option("--baseline", "baseline_url", metavar="URL", help="Same target without speculation.")
@click.option("--candidate-profile", type=profile_argument, help="Profile the candidate runs.")
@click.option("--baseline-profile", type=profile_argument, help="Profile the baseline runs.")
@click.option(
    "--workload",
    default="code-edit",
    show_default=True,
    metavar="FILE|NAME",
    help="JSONL file, or a built-in set: code-edit (predictable), chat (open).",
)
@click.option(
    "--concurrency",
    default="1,4,16",
    show_default=True,
    callback=_levels,
    help="Concurrency levels to sweep (closed loop), comma-separated.",
)
@click.option(
    "--request-rate",
    "request_rates",
    default=None,
    metavar="RATES",
    callback=_rates,
    help="Sweep open-loop Poisson arrival rates (requests/s, comma-separated) instead of "
    "concurrency; both arms get the same arrival schedule.",
)
@click.option(
    "--requests",
    default=32,
    show_default=True,
    type=click.IntRange(1, 100_000),
    help="Requests per arm per level.",
)
@click.option(
    "--max-tokens",
    default=256,
    show_default=True,
    type=click.IntRange(1),
    help="Output tokens per request, unless the workload item sets max_tokens.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("bench-out"),
    show_default=True,
    help="Directory for bench.json, bench.md and bench.png.",
)
@click.option("--model", default=None, help="Model name to request (default: each /v1/models).")
@click.option(
    "--api-key-env",
    metavar="VAR",
    default=None,
    help="Environment variable holding the API key for hosted endpoints (redacted from every "
    "output).",
)
@click.option(
    "--chat/--completions",
    default=False,
    show_default=True,
    help="Use /v1/chat/completions or /v1/completions.",
)
@click.option(
    "--prediction-on",
    type=click.Choice(["both", "candidate"]),
    default="both",
    show_default=True,
    help="Which arms get the workload's `prediction` (OpenAI Predicted Outputs, with --chat): "
    "'candidate' measures what it buys when one endpoint serves as both arms.",
)
@click.option("--temperature", default=0.0, show_default=True, type=click.FloatRange(0.0))
@click.option("--top-p", default=None, type=click.FloatRange(0.0, 1.0))
@click.option("--seed", default=None, type=int)
@click.option("--ignore-eos", is_flag=True, help="Generate exactly max_tokens (vLLM/SGLang).")
@click.option(
    "--timeout",
    default=120.0,
    show_default=True,
    type=click.FloatRange(0.1),
    help="Seconds one request may take in total.",
)
@click.option(
    "--stall-timeout",
    default=30.0,
    show_default=True,
    type=click.FloatRange(0.1),
    help="Seconds of silence inside one stream before it counts as stalled.",
)
@click.option(
    "--level-time-limit",
    default=600.0,
    show_default=True,
    type=click.FloatRange(1.0),
    help="No new request starts after this many seconds in one arm-level.",
)
@click.option("--slo-ttft-ms", default=None, type=click.FloatRange(0.0), help="Goodput SLO: TTFT.")
@click.option("--slo-tpot-ms", default=None, type=click.FloatRange(0.0), help="Goodput SLO: TPOT.")
@offline_option
def bench(
    profile: Path | None,
    candidate_url: str | None,
    baseline_url: str | None,
    candidate_profile: Path | None,
    baseline_profile: Path | None,
    workload: str,
    concurrency: tuple[int, ...],
    request_rates: tuple[float, ...],
    requests: int,
    max_tokens: int,
    out: Path,
    model: str | None,
    api_key_env: str | None,
    chat: bool,
    prediction_on: Literal["both", "candidate"],
    temperature: float,
    top_p: float | None,
    seed: int | None,
    ignore_eos: bool,
    timeout: float,
    stall_timeout: float,
    level_time_limit: float,
    slo_ttft_ms: float | None,
    slo_tpot_ms: float | None,
    offline: bool,
) -> None:
    """Speculative (candidate) vs baseline, same target, at each load level: a concurrency
    (closed loop) or, with --request-rate, an arrival rate (open loop).

    Writes OUT/bench.json, bench.md and bench.png. PROFILE (or --candidate-profile with
    --baseline-profile) first checks that the two launches differ only in the proposer.
    Exit codes: 0 measured, 7 endpoints unusable, 130 interrupted.
    """
    from orchestrator.bench.client import Endpoint, Sampling
    from orchestrator.bench.report import write_reports
    from orchestrator.bench.secrets import bench_redactor, redacted
    from orchestrator.bench.summary import Slo
    from orchestrator.bench.sweep import SweepConfig, run_sweep
    from orchestrator.bench.verdict import judge
    from orchestrator.bench.workload import load_workload

    _check_profiles(profile, candidate_profile, baseline_profile, offline)
    if not candidate_url or not baseline_url:
        raise click.UsageError("--candidate URL and --baseline URL are both required")
    source = click.get_current_context().get_parameter_source("concurrency")
    if request_rates and source is click.core.ParameterSource.COMMANDLINE:
        raise click.UsageError(
            "--concurrency and --request-rate each choose the load to sweep; give one of them"
        )
    if prediction_on == "candidate" and not chat:
        raise click.UsageError(
            "--prediction-on candidate: predictions are sent only with --chat (OpenAI Predicted "
            "Outputs exist only in the chat API); add --chat"
        )
    api: Literal["chat", "completions"] = "chat" if chat else "completions"
    key = _api_key(api_key_env)
    _one_credential(key, candidate_url, baseline_url)
    config = SweepConfig(
        concurrency=concurrency,
        request_rates=request_rates,
        requests=requests,
        max_tokens=max_tokens,
        sampling=Sampling(temperature, top_p, seed, ignore_eos),
        timeout_s=timeout,
        stall_s=stall_timeout,
        level_time_limit_s=level_time_limit,
        prediction_on=prediction_on,
    )
    # Every line bench prints, every error it raises, every log record and both reports pass
    # through `redact`: servers echo what they are sent, so their text may hold the key.
    redact = bench_redactor(key, (candidate_url, baseline_url))

    def say(line: str, err: bool = False) -> None:
        click.echo(redact(line), err=err)

    with redacted(redact):
        record = run_sweep(
            Endpoint("candidate", candidate_url, model or "", api, key),
            Endpoint("baseline", baseline_url, model or "", api, key),
            load_workload(workload),
            config,
            progress=lambda line: say(line, err=True),
        )
        verdict = judge(record, Slo(slo_ttft_ms, slo_tpot_ms))
        paths = write_reports(record, verdict, out, redact)
        for warning in verdict.warnings:
            say(f"warning ({warning.code}): {warning.message}", err=True)
        say(verdict.crossover.summary)
        say("wrote " + ", ".join(str(p) for p in paths))
        arms = [arm for lv in verdict.levels for arm in (lv.candidate, lv.baseline) if arm]
        _exit(record.interrupted, arms)


def _api_key(variable: str | None) -> str | None:
    if variable is None:
        return None
    value = os.environ.get(variable)
    if not value:
        raise BenchError(
            f"--api-key-env {variable}: the variable is not set or empty",
            why="the hosted endpoints need an API key, which is read only from the environment",
            fix=f"export {variable}=... before running specdeploy bench",
        )
    return value


def _one_credential(key: str | None, *urls: str) -> None:
    """Refuse an API key together with a URL's user:password (both would be the Authorization
    header; aiohttp refuses the pair). The message names the option, never the URL."""
    if key is None:
        return
    from urllib.parse import urlsplit

    for label, url in zip(("candidate", "baseline"), urls, strict=True):
        if "@" in urlsplit(url).netloc:
            raise click.UsageError(
                f"--{label}: the URL carries credentials (user:password@) and --api-key-env "
                "gives an API key; both would be the Authorization header. Give one of them"
            )


def _exit(interrupted: bool, summaries: list[ArmSummary]) -> None:
    ctx = click.get_current_context()
    if interrupted:
        ctx.exit(EXIT_INTERRUPTED)
    for label in ("candidate", "baseline"):
        if not any(a.ok for a in summaries if a.label == label):
            raise BenchError(
                f"--{label}: no request succeeded at any level (see the report's errors)",
                why="without completed requests there is nothing to compare",
                fix=f"check that the {label} server stays up under load; raise --timeout",
            )


def _check_profiles(
    profile: Path | None, candidate: Path | None, baseline: Path | None, offline: bool
) -> None:
    """Refuse a confounded A/B when the arms are known profiles (see orchestrator.bench.pairing)."""
    if profile is not None and candidate is not None:
        raise click.UsageError("give PROFILE or --candidate-profile, not both")
    candidate = candidate or profile
    if candidate is None and baseline is None:
        return
    if candidate is None:
        raise click.UsageError("--baseline-profile needs --candidate-profile (or PROFILE)")
    from orchestrator.bench.pairing import require_same_target
    from orchestrator.engines import ENGINES

    cand_launch = _launch(candidate, offline, baseline=False)
    base_launch = _launch(baseline or candidate, offline, baseline=baseline is None)
    names = (str(candidate), str(baseline) if baseline else f"{candidate} (baseline twin)")
    flags = ENGINES[cand_launch.engine].speculative_flags()
    require_same_target(cand_launch, base_launch, flags, names=names)


def _launch(path: Path, offline: bool, *, baseline: bool) -> EngineLaunch:
    from orchestrator.plan.build import load_and_plan
    from orchestrator.plan.types import DeploymentPlan

    plan = load_and_plan(path, offline=offline)
    if not isinstance(plan, DeploymentPlan):
        problems = "; ".join(f"{f.rule}: {f.what}" for f in plan.errors) or "not renderable"
        raise BenchError(
            f"{path}: the profile does not render a launch ({problems})",
            why="the A/B check compares the two rendered launches",
            fix=f"run `specdeploy validate {path}` and fix what it reports",
        )
    return plan.launch_for(container=False, baseline=baseline)


COMMANDS = (bench,)
