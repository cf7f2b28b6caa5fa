"""tune: measure draft length x load, against servers the user runs, engines it starts itself
on this host (--local, one at a time) or deployments it applies to a cluster (--cluster, one at
a time), and write the schedule.

Exit codes: 0 measured (every cell), 3/4 the profile (or its variant for one k) is invalid or
does not speculate, 6 an engine --local started refused or died, or the cluster refused an arm
or it never got ready, 7 an endpoint is unusable, 2 usage
(including an --out DIR measured with other settings), 130 interrupted (every finished cell is
kept in --out DIR; run again to measure the rest).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import socket
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

import click

from orchestrator.cli.bench_cmd import EXIT_INTERRUPTED, _levels
from orchestrator.cli.options import profile_argument
from orchestrator.errors import IncompatibleError
from orchestrator.output_dirs import OwnedDirectory, write_files

if TYPE_CHECKING:
    from orchestrator.tune.run import Served

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
_executable = click.Path(exists=True, dir_okay=False, path_type=Path)


EXAMPLE: Final = """\b
A worked run (the README has its table and heatmap): one server per k on 127.0.1.<k>:18080 and
the target alone on 127.0.1.100:18080, then
  specdeploy tune profiles/local/layered-tune.yaml \\
    --endpoint-per-k 'http://127.0.1.{k}:18080' --baseline http://127.0.1.100:18080 \\
    --k 2,4,8 --concurrency 1,4,12 --requests 24 --max-tokens 24 --ignore-eos --out out/tune
prints the speedup table (k x concurrency, 95 % intervals, the choice in bold) and writes
out/tune/{tune.json,tune.md,tune.png,profile.yaml}; profile.yaml carries
num_speculative_tokens_per_batch_size, e.g. [[1, 16, 4]].
On a cluster, each arm applied and measured in turn, then deleted:
  specdeploy tune profiles/vllm-qwen3-8b-ngram.yaml --cluster --k 2,4 --concurrency 1,8,32
"""


@click.command("tune", epilog=EXAMPLE)
@click.argument("profile", type=profile_argument)
@click.option(
    "--endpoint-per-k",
    "endpoint_per_k",
    metavar="URL",
    help="Where the server with draft length k answers: a URL with {k} in it, e.g. "
    "http://spec-k{k}:8000 (one server per k, all the profile's target and proposer).",
)
@click.option("--baseline", "baseline_url", metavar="URL", help="The target alone.")
@click.option(
    "--local", is_flag=True, help="Start the engines on this host instead, one at a time (as "
    "`run --local` does): the baseline, then the profile with each k.",
)  # fmt: skip
@click.option(
    "--cluster", is_flag=True, help="Apply each arm to the kube context's cluster instead, one "
    "at a time (`<name>-tune-baseline`, then `<name>-tune-k<k>`), measure it through the API "
    "server's service proxy, and delete it before the next.",
)  # fmt: skip
@click.option("--context", help="--cluster: the kube context (default: the current one).")
@click.option(
    "--namespace", help="--cluster: namespace when the profile has none (default: the context's)."
)
@click.option("--engine-bin", type=_executable, help="--local: the engine executable.")
@click.option("--python", type=_executable, help="--local: the interpreter of the engine's venv.")
@click.option(
    "--engine-timeout", default=600.0, show_default=True, type=click.FloatRange(1.0),
    help="--local, --cluster: seconds each engine (each arm's workloads) may take to become "
    "ready; on a cluster, pulling the image and the weights counts.",
)  # fmt: skip
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
    "--exhaustive", is_flag=True, help="Measure every cell with every request (by default a k "
    "above one that already lost at this or a lower load is skipped, and a cell stops after a "
    "round of requests once its interval decides it).",
)  # fmt: skip
@click.option(
    "--out", "out", default=Path("out/tune"), show_default=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="tune.json, tune.md, tune.png, profile.yaml; cells already measured there are reused.",
)  # fmt: skip
@click.option("--offline", is_flag=True, help="Never contact the model hub while planning.")
def tune(
    profile: Path,
    endpoint_per_k: str | None,
    baseline_url: str | None,
    local: bool,
    cluster: bool,
    context: str | None,
    namespace: str | None,
    engine_bin: Path | None,
    python: Path | None,
    engine_timeout: float,
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

    The servers are yours (--endpoint-per-k and --baseline), or --local starts them on this
    host one at a time, as one GPU holds them: the baseline twin first, then the profile with
    each k, each stopped before the next starts. --cluster does the same on the kube context's
    cluster: each arm is applied as its own deployment, measured through the API server's
    service proxy once ready, and deleted (also on Ctrl-C) before the next.

    \b
    Exit codes: 0 measured, 3/4 PROFILE (or its variant for one k) invalid or not speculative,
    6 an engine --local started refused or died, or an arm --cluster applied was refused or
    never ready, 7 an endpoint unusable, 2 usage, 130 interrupted.
    """
    from orchestrator.bench.client import Sampling
    from orchestrator.bench.secrets import bench_redactor, redacted
    from orchestrator.bench.sweep import SweepConfig
    from orchestrator.bench.workload import load_workload
    from orchestrator.plan.build import load_and_plan
    from orchestrator.plan.types import DeploymentPlan
    from orchestrator.runner.base import RunOptions
    from orchestrator.tune import report
    from orchestrator.tune.run import (
        CLUSTER,
        JSON_NAME,
        LOCAL,
        TuneSettings,
        TuneState,
        load_cells,
        tune_serving_each,
    )
    from orchestrator.tune.run import tune as run_tune

    if local and cluster:
        raise click.UsageError(
            "--local and --cluster both serve the arms: give one (this host, or the cluster)"
        )
    serving_here = "--local" if local else "--cluster" if cluster else None
    if serving_here and (endpoint_per_k or baseline_url):
        raise click.UsageError(
            f"{serving_here} serves the engines itself; it takes no --endpoint-per-k or "
            f"--baseline (give either {serving_here}, or both URLs for servers you run)"
        )
    if not serving_here and not (endpoint_per_k and baseline_url):
        raise click.UsageError(
            "tune needs servers: --endpoint-per-k URL-with-{k} and --baseline URL for servers "
            "you run, --local to start each one on this host, or --cluster to apply each one "
            "to the kube context's cluster"
        )
    if not cluster and (context or namespace):
        raise click.UsageError("--context and --namespace choose where --cluster applies")
    if endpoint_per_k is not None and "{k}" not in endpoint_per_k:
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
    serve = None
    token = None
    if local:
        options = RunOptions(engine_bin, python, None, engine_timeout)
        serve = _local_engines(profile, plan, ks, options, offline)
        endpoint_per_k = baseline_url = LOCAL
    elif cluster:
        serve, where, token = _cluster_engines(
            profile, plan, ks, context, namespace, engine_timeout, offline
        )
        endpoint_per_k = baseline_url = f"{CLUSTER} ({where})"
    assert endpoint_per_k is not None and baseline_url is not None
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
    redact = bench_redactor(token, (endpoint_per_k, baseline_url))
    max_batch = spec.serving.max_concurrency
    fixed_because = _fixed_because(plan)
    source_text = profile.read_text(encoding="utf-8")

    def files(state: TuneState, final: bool) -> dict[str, str]:
        document: dict[str, Any] = redact.data(report.to_json(state, str(profile), max_batch))  # type: ignore[assignment]
        written = {
            JSON_NAME: json.dumps(document, indent=2) + "\n",
            report.MARKDOWN_NAME: redact(report.to_markdown(state, document)),
        }
        if final:
            tuned = report.tuned_profile(document, source_text, fixed_because, profile, out)
            if tuned is not None and _valid(tuned, out / report.PROFILE_NAME):
                written[report.PROFILE_NAME] = tuned
        return written

    def save(state: TuneState) -> None:
        write_files(files(state, False), out, TUNED)

    with redacted(redact):
        cells = load_cells(out, settings)
        if cells:
            click.echo(f"reusing {len(cells)} cell(s) measured in {out}", err=True)
        echo = lambda line: click.echo(redact(line), err=True)  # noqa: E731
        if serve is None:
            state = run_tune(settings, cells, save, echo)
        else:
            state = tune_serving_each(settings, cells, save, echo, serve)
        # an interrupted run writes no profile: a schedule from some of the loads would mislead
        paths = write_files(files(state, not state.interrupted), out, TUNED)
        document = json.loads(paths[[p.name for p in paths].index(JSON_NAME)].read_text())
        report.write_png(state, report.summary(state, max_batch)["choices"], out / report.PNG_NAME)
        click.echo(redact(report.to_markdown(state, document)))
        click.echo("wrote " + ", ".join(str(p) for p in [*paths, out / report.PNG_NAME]))
    if state.interrupted:
        click.get_current_context().exit(EXIT_INTERRUPTED)


def _local_engines(
    path: Path, plan: Any, ks: tuple[int, ...], options: Any, offline: bool
) -> Callable[[int], AbstractContextManager[Served]]:
    """What serves each k (0: the baseline) on this host, one engine at a time, each planned
    before anything starts (`variant_plans`)."""
    from orchestrator.cli.run_cmd import WaitProgress
    from orchestrator.runner.local import serving
    from orchestrator.tune.run import Served
    from orchestrator.tune.variants import variant_plans

    plans = variant_plans(path, plan, ks, offline=offline, how="tune --local")
    launches = {k: planned.launch_for(container=False) for k, planned in plans.items()}
    launches[0] = plan.launch_for(container=False, baseline=True)

    @contextlib.contextmanager
    def serve(k: int) -> Iterator[Served]:
        echo = lambda line: click.echo(line, err=True)  # noqa: E731
        chosen = dataclasses.replace(options, port=_free_port())
        with serving(launches[k], chosen, echo=echo, progress=WaitProgress()) as served:
            yield Served(served.url)

    return serve


def _cluster_engines(
    path: Path,
    plan: Any,
    ks: tuple[int, ...],
    context: str | None,
    namespace: str | None,
    timeout: float,
    offline: bool,
) -> tuple[Callable[[int], AbstractContextManager[Served]], str, str | None]:
    """What serves each k on the kube context's cluster, where that is (context and namespace,
    for tune.json), and the kubeconfig's bearer token, for the redactor: it never reaches a file
    or the terminal."""
    from orchestrator.deploy.kube.proxy import bearer_token
    from orchestrator.deploy.kubernetes_cluster import KubernetesCluster
    from orchestrator.tune.cluster import cluster_engines

    cluster = KubernetesCluster(context=context, namespace=namespace)
    where = plan.profile.metadata.namespace or cluster.namespace
    echo = lambda line: click.echo(line, err=True)  # noqa: E731
    serve = cluster_engines(
        path, plan, ks, cluster, where, timeout=timeout, echo=echo, offline=offline
    )
    return serve, f"context {context or 'current'}, namespace {where}", bearer_token(cluster)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


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


def _fixed_because(plan: Any) -> str | None:
    """Why the tuned profile gets one draft length instead of a schedule (None: it gets the
    schedule): the engine release reads none as specdeploy renders it (vLLM before 0.32.0,
    TensorRT-LLM), or would not run this profile's (SGLang's adaptive slots for EAGLE chains
    only; vLLM with data parallelism)."""
    from orchestrator.engines import ENGINES

    engine = ENGINES[plan.profile.engine.name]
    support = engine.reads_batch_size_schedule(plan.release)
    if support.supported is not True:
        return f"{engine.name} {plan.release.version}: {support.reason}"
    return engine.schedule_blocked_by(plan.profile)


COMMANDS: tuple[click.Command, ...] = (tune,)
