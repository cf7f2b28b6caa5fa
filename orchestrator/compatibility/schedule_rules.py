"""Draft-length schedule rules that hold for every engine: whether the engine release takes
`proposer.num_speculative_tokens_per_batch_size` at all, and that a baseline has nothing to
schedule. What vLLM accepts inside a schedule is checked by its own rules
(`orchestrator/engines/vllm_rules.py`)."""

from __future__ import annotations

from dataclasses import replace

from orchestrator.compatibility.rule import CompatContext, Finding, rule
from orchestrator.compatibility.unchecked import at_field
from orchestrator.engines import ENGINES
from orchestrator.engines.capabilities import known_versions, release_for
from orchestrator.engines.names import ENGINE_NAMES, EngineName

SCHEDULE_FIELD = "proposer.num_speculative_tokens_per_batch_size"
#: What carries the schedule in each engine's launch (what a release without it refuses).
_CARRIER: dict[str, str] = {
    "vllm": "--speculative-config",
    "sglang": "--speculative-adaptive-config",
    "trtllm": "the speculative config",
}


def _scheduled(ctx: CompatContext) -> bool:
    return ctx.profile.proposer.num_speculative_tokens_per_batch_size is not None


@rule(
    "engine.spec-schedule-supported",
    source="https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/config/speculative.py#L490-L496 "
    "(vLLM 0.32.0 has the field); https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/"
    "srt/arg_groups/fields/spec.py#L31-L280 (SGLang 0.5.23 has none); "
    "https://github.com/NVIDIA/TensorRT-LLM/blob/7e873e54c296912df55b4c961e67079963ae4d34/1.2.0/"
    "_modules/tensorrt_llm/llmapi/llm_args.html (TensorRT-LLM 1.2.0 DecodingBaseConfig: fields "
    "specdeploy does not map); orchestrator/engines/vllm.py, orchestrator/engines/sglang.py and "
    "orchestrator/engines/trtllm.py reads_batch_size_schedule",
    applies=lambda ctx: _scheduled(ctx) and ctx.profile.speculative,
)
def schedule_is_supported(ctx: CompatContext) -> Finding | None:
    """vLLM and SGLang take a draft length per batch-size range as specdeploy renders it
    (`num_speculative_tokens_per_batch_size` in vLLM 0.32.0's speculative config; SGLang 0.5.23's
    --speculative-adaptive-config slots). TensorRT-LLM's own fields are not mapped, so its launch
    would run one draft length at every load while the profile says otherwise: an error. vLLM
    releases before 0.32.0 and SGLang releases before 0.5.23 were not read (the first release
    with the setting is not established), and a release without it refuses the launch, so there
    it is a warning that says so."""
    support = ENGINES[ctx.engine].reads_batch_size_schedule(ctx.release)
    if support.supported:
        return None
    where = f"{SCHEDULE_FIELD} on {ctx.engine} {ctx.release.version}"
    if support.supported is None:
        finding = Finding.warning(
            what=f"{where}: not verified ({support.reason})",
            why=f"if this release lacks the setting, the engine refuses {_CARRIER[ctx.engine]} "
            "at start-up; if it has it, its checks may differ from the ones specdeploy ran",
            fix=f"set engine.version to {_first_supporting(ctx.engine)} or newer; once this "
            "release's speculative config is known to have the field, pass --ignore "
            "engine.spec-schedule-supported",
        )
    else:
        finding = Finding.error(
            what=f"{where}: {support.reason}",
            why="the launch would run proposer.num_speculative_tokens at every load, not the "
            "draft lengths the profile schedules",
            fix=f"remove {SCHEDULE_FIELD} (one draft length at every load), or serve with "
            f"{_engines_with_schedules()}",
        )
    return replace(finding, source=support.source, field=SCHEDULE_FIELD)


def _engines_with_schedules() -> str:
    return " or ".join(
        f"engine.name: {engine} at {version} or newer"
        for engine in ENGINE_NAMES
        if (version := _first_supporting(engine)) is not None
    )


def _first_supporting(engine: EngineName) -> str | None:
    """The first release in the capability matrix where `engine` takes a schedule."""
    for version in known_versions(engine):
        if ENGINES[engine].reads_batch_size_schedule(release_for(engine, version)).supported:
            return version
    return None


@rule(
    "engine.spec-schedule-baseline",
    source="orchestrator/profile/schema.py Profile.as_baseline and each engine's "
    "speculative_flags (a launch without a proposer carries no speculative configuration)",
    applies=lambda ctx: _scheduled(ctx) and not ctx.profile.speculative,
)
def schedule_needs_a_proposer(ctx: CompatContext) -> Finding | None:
    """A schedule says how many draft tokens to propose at each load. With proposer.method:
    none there is no proposer and the launch carries no speculative configuration, so the
    schedule would be dropped without a word and the profile would describe a dynamic draft
    length that never runs."""
    schedule = ctx.profile.proposer.num_speculative_tokens_per_batch_size or ()
    return at_field(
        SCHEDULE_FIELD,
        Finding.error(
            what=f"{SCHEDULE_FIELD} has {len(schedule)} range(s) but proposer.method is 'none'",
            why="a baseline launch has no speculative configuration: nothing drafts at any load "
            "and the schedule is silently dropped",
            fix=f"remove {SCHEDULE_FIELD}, or set proposer.method (with its model) to speculate",
        ),
    )


RULES = (schedule_is_supported, schedule_needs_a_proposer)
