"""tune: measure draft length x load against servers the user runs, and write the schedule.

Exit codes: 0 measured (every cell), 3 the profile is invalid or does not speculate, 7 an
endpoint is unusable, 2 usage (including an --out DIR measured with other settings), 130
interrupted (every finished cell is kept in --out DIR; run again to measure the rest).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final, Literal

import click

from orchestrator.cli.bench_cmd import EXIT_INTERRUPTED, _levels
from orchestrator.cli.options import profile_argument
from orchestrator.errors import IncompatibleError
from orchestrator.output_dirs import OwnedDirectory, write_files

TUNED: Final = OwnedDirectory(
    command="tune",
    option="--out",
    marker=".specdeploy-tune",
    marker_text="Written by `specdeploy tune`, which rewrites this directory after every cell it\n"
    "measures (tune.json keeps them); files added here are deleted by the next write.\n",
    output="the tune results",
    why_write="tune keeps every measured cell in tune.json there; the cells of this run that "
    "were written before the failure are kept",
    fix="pass --out a directory you can write to, on a filesystem with free space",
)
#: The first vLLM release whose speculative config takes num_speculative_tokens_per_batch_size
#: that specdeploy has read (vllm/config/speculative.py at v0.32.0).
DYNAMIC_SINCE: Final = (0, 32, 0)


EXAMPLE: Final = """\b
A worked run (the README has its table and heatmap): one server per k on 127.0.1.<k>:18080 and
the target alone on 127.0.1.100:18080, then
  specdeploy tune profiles/local/layered-tune.yaml \\
    --endpoint-per-k 'http://127.0.1.{k}:18080' --baseline http://127.0.1.100:18080 \\
    --k 2,4,8 --concurrency 1,4,12 --requests 24 --max-tokens 24 --ignore-eos --out out/tune
prints the speedup table (k x concurrency, 95 % intervals, the choice in bold) and writes
out/tune/{tune.json,tune.md,tune.png,profile.yaml}; profile.yaml carries
num_speculative_tokens_per_batch_size, e.g. [[1, 16, 4]].
"""


@click.command("tune", epilog=EXAMPLE)
@click.argument("profile", type=profile_argument)
@click.option(
    "--endpoint-per-k",
    "endpoint_per_k",
    required=True,
    metavar="URL",
    help="Where the server with draft length k answers: a URL with {k} in it, e.g. "
    "http://spec-k{k}:8000 (one server per k, all the profile's target and proposer).",
)
@click.option("--baseline", "baseline_url", required=True, metavar="URL", help="The target alone.")
@click.option("--k", "ks", default="1,2,3,5,8", show_default=True, callback=_levels)
@click.option("--concurrency", default="1,4,16", show_default=True, callback=_levels)
@click.option("--workload", default="chat", show_default=True, help="chat, code-edit or a JSONL.")
@click.option("--requests", default=16, show_default=True, type=click.IntRange(2, 10_000))
@click.option("--max-tokens", default=128, show_default=True, type=click.IntRange(1, 1 << 20))
@click.option("--chat", is_flag=True, help="Use /v1/chat/completions instead of /v1/completions.")
@click.option("--ignore-eos", is_flag=True, help="Generate exactly max_tokens (vLLM/SGLang).")
@click.option("--timeout", default=120.0, show_default=True, type=click.FloatRange(1.0))
@click.option("--stall-timeout", default=30.0, show_default=True, type=click.FloatRange(1.0))
@click.option(
    "--exhaustive", is_flag=True, help="Measure every cell (by default a k above one that already "
    "lost at this or a lower load is skipped).",
)  # fmt: skip
@click.option(
    "--out", "out", default=Path("out/tune"), show_default=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="tune.json, tune.md, tune.png, profile.yaml; cells already measured there are reused.",
)  # fmt: skip
@click.option("--offline", is_flag=True, help="Never contact the model hub while planning.")
def tune(
    profile: Path,
    endpoint_per_k: str,
    baseline_url: str,
    ks: tuple[int, ...],
    concurrency: tuple[int, ...],
    workload: str,
    requests: int,
    max_tokens: int,
    chat: bool,
    ignore_eos: bool,
    timeout: float,
    stall_timeout: float,
    exhaustive: bool,
    out: Path,
    offline: bool,
) -> None:
    """Measure each draft length k (--k) at each load (--concurrency) against the baseline,
    choose k per load (k = 0, the baseline, where no k pays beyond noise; the smaller k on a
    tie), and write tune.json (every cell with its interval), tune.md, a heatmap tune.png and
    profile.yaml: PROFILE with vLLM's num_speculative_tokens_per_batch_size schedule from the
    measurements (releases that have it; others get the best fixed k). Each cell is one bench
    level, both arms, the same requests. Interrupted, every finished cell is kept; run again
    with the same --out to measure the rest.

    \b
    Exit codes: 0 measured, 3 PROFILE invalid or not speculative, 7 an endpoint unusable,
    2 usage, 130 interrupted.
    """
    from orchestrator.bench.client import Sampling
    from orchestrator.bench.secrets import bench_redactor, redacted
    from orchestrator.bench.sweep import SweepConfig
    from orchestrator.bench.workload import load_workload
    from orchestrator.plan.build import load_and_plan
    from orchestrator.plan.types import DeploymentPlan
    from orchestrator.tune import report
    from orchestrator.tune.run import JSON_NAME, TuneSettings, TuneState, load_cells
    from orchestrator.tune.run import tune as run_tune

    if "{k}" not in endpoint_per_k:
        raise click.BadParameter(
            f"{endpoint_per_k!r} has no {{k}}: it names one server per draft length, e.g. "
            "http://spec-k{k}:8000",
            param_hint="--endpoint-per-k",
        )
    plan = load_and_plan(profile, offline=offline)
    if not isinstance(plan, DeploymentPlan):
        first = plan.errors[0]
        raise IncompatibleError(
            f"{profile}: {first.rule}: {first.what}",
            why="tune measures the deployment a valid profile describes",
            fix=f"`specdeploy validate {profile}` lists every error; fix them first",
        )
    spec = plan.profile
    if spec.proposer.method == "none":
        raise IncompatibleError(
            f"{profile}: proposer.method is 'none'",
            why="tune chooses the draft length, and a baseline has none",
            fix="give tune the speculative profile (the baseline is --baseline)",
        )
    config = SweepConfig(
        requests=requests,
        max_tokens=max_tokens,
        sampling=Sampling(0.0, None, None, ignore_eos),
        timeout_s=timeout,
        stall_s=stall_timeout,
    )
    api: Literal["chat", "completions"] = "chat" if chat else "completions"
    settings = TuneSettings(
        ks=ks,
        loads=concurrency,
        endpoint_per_k=endpoint_per_k,
        baseline=baseline_url,
        workload=load_workload(workload),
        config=config,
        exhaustive=exhaustive,
        api=api,
    )
    redact = bench_redactor(None, (endpoint_per_k, baseline_url))
    max_batch = spec.serving.max_concurrency
    dynamic = spec.engine.name == "vllm" and _release(spec.engine.version) >= DYNAMIC_SINCE
    source_text = profile.read_text(encoding="utf-8")

    def files(state: TuneState, final: bool) -> dict[str, str]:
        document: dict[str, Any] = redact.data(report.to_json(state, str(profile), max_batch))  # type: ignore[assignment]
        written = {
            JSON_NAME: json.dumps(document, indent=2) + "\n",
            report.MARKDOWN_NAME: redact(report.to_markdown(state, document)),
        }
        if final:
            tuned = report.tuned_profile(document, source_text, dynamic, profile, out)
            if tuned is not None and _valid(tuned, out / report.PROFILE_NAME):
                written[report.PROFILE_NAME] = tuned
        return written

    def save(state: TuneState) -> None:
        write_files(files(state, False), out, TUNED)

    with redacted(redact):
        cells = load_cells(out, settings)
        if cells:
            click.echo(f"reusing {len(cells)} cell(s) measured in {out}", err=True)
        state = run_tune(settings, cells, save, lambda line: click.echo(redact(line), err=True))
        # an interrupted run writes no profile: a schedule from some of the loads would mislead
        paths = write_files(files(state, not state.interrupted), out, TUNED)
        document = json.loads(paths[[p.name for p in paths].index(JSON_NAME)].read_text())
        report.write_png(state, report.summary(state, max_batch)["choices"], out / report.PNG_NAME)
        click.echo(redact(report.to_markdown(state, document)))
        click.echo("wrote " + ", ".join(str(p) for p in [*paths, out / report.PNG_NAME]))
    if state.interrupted:
        click.get_current_context().exit(EXIT_INTERRUPTED)


def _valid(text: str, path: Path) -> bool:
    """The tuned profile parses as a profile; tune never writes one that does not."""
    from orchestrator.profile.loading import ProfileInvalid, parse_profile

    try:
        parse_profile(text, str(path))
    except ProfileInvalid as exc:
        problems = "; ".join(f"{i.path}: {i.message}" for i in exc.issues)
        click.echo(f"{path.name} not written: it would not validate ({problems})", err=True)
        return False
    return True


def _release(version: str) -> tuple[int, ...]:
    parts = []
    for part in version.split(".")[:3]:
        digits = "".join(ch for ch in part if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


COMMANDS: tuple[click.Command, ...] = (tune,)
