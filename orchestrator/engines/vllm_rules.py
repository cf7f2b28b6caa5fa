"""vLLM-only compatibility rules. Run only for profiles with engine.name: vllm
(`VllmEngine.rules`): the CPU backend's memory share, and what vLLM does with a draft-length
schedule (`proposer.num_speculative_tokens_per_batch_size`), from vLLM 0.32.0's code."""

from __future__ import annotations

from typing import Final

from orchestrator.compatibility.rule import CompatContext, Finding, rule
from orchestrator.compatibility.schedule_rules import SCHEDULE_FIELD
from orchestrator.compatibility.unchecked import at_field
from orchestrator.profile.schema import ScheduleEntry

#: Above this share of host memory a CPU vLLM server leaves too little for anything beside it.
CPU_MEMORY_SHARE_WARNING = 0.5


@rule(
    "engine.cpu-memory-fraction",
    source="https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/v1/worker/cpu_worker.py#L83-L95 ('On the CPU backend, the "
    "`--gpu-memory-utilization` flag controls the fraction of CPU memory reserved'; seen running "
    "profiles/local with two servers)",
    applies=lambda ctx: ctx.profile.hardware.device == "cpu",
)
def cpu_memory_fraction_is_modest(ctx: CompatContext) -> Finding | None:
    """vLLM's CPU backend reserves serving.gpu_memory_fraction of *host* memory at start-up and
    refuses to start when less is free, so the GPU-minded default (0.9) leaves no room for a
    second server (such as the baseline of an A/B) or much else on the machine."""
    share = ctx.profile.serving.gpu_memory_fraction
    if share <= CPU_MEMORY_SHARE_WARNING:
        return None
    return Finding.warning(
        what=f"serving.gpu_memory_fraction={share} on hardware.device: cpu reserves that share of host memory",
        why="vLLM refuses to start when that much host memory is not free, e.g. beside a baseline server",
        fix="set serving.gpu_memory_fraction to what the server needs (0.15 serves the tiny models)",
    )


_V: Final = "https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/"
#: vLLM's own words for each condition `validate_and_normalize_dynamic_sd_schedule` checks, in the
#: order it checks them
#: (https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/v1/spec_decode/dynamic/utils.py#L43-L72).
#: k >= 0 (#L52-L55 there) needs no rule: the profile schema refuses a negative count at load.
_POSITIVE: Final = "Batch-size range ({start}, {end}) must be positive."
_ORDERED: Final = "Batch-size range start must be <= end for ({start}, {end}, {k})."
_DISJOINT: Final = "Batch-size ranges must be non-overlapping and sorted."
_FROM_ONE: Final = (
    "The first batch-size range must start at 1 so every runtime batch size has a defined schedule."
)


def _scheduled(ctx: CompatContext) -> bool:
    return (
        ctx.profile.speculative
        and ctx.profile.proposer.num_speculative_tokens_per_batch_size is not None
    )


def _schedule(ctx: CompatContext) -> tuple[ScheduleEntry, ...]:
    return ctx.profile.proposer.num_speculative_tokens_per_batch_size or ()


@rule(
    "engine.spec-schedule-valid",
    source=f"{_V}v1/spec_decode/dynamic/utils.py#L7-L74 (validate_and_normalize_dynamic_sd_schedule"
    f", called by build_dynamic_sd_schedule_lookup #L77-L97); {_V}v1/core/sched/scheduler.py"
    "#L307-L314 (built when the engine core starts)",
    applies=_scheduled,
)
def schedule_is_valid(ctx: CompatContext) -> list[Finding]:
    """vLLM types the schedule when it builds its config but checks it only when the engine core
    starts its scheduler (`build_dynamic_sd_schedule_lookup`), where any of these conditions
    raises and the server exits: range_start and range_end > 0, range_start <= range_end, no two
    ranges overlapping once sorted by start, and the first range starting at 1 (so every batch
    size has a draft length). Each condition is reported with vLLM's own message, in the order
    vLLM checks them (the first finding is the error vLLM raises)."""
    findings = []
    ranges = []
    for index, (start, end, k) in enumerate(_schedule(ctx)):
        if start <= 0 or end <= 0:
            findings.append(
                _invalid(index, (start, end, k), _POSITIVE, "make both bounds 1 or more")
            )
        elif start > end:
            findings.append(
                _invalid(index, (start, end, k), _ORDERED, f"write it as [{end}, {start}, {k}]")
            )
        else:
            ranges.append((start, end, k, index))
    ranges.sort(key=lambda r: r[0])  # as vLLM sorts them (stable, by range_start)
    for position, current in enumerate(ranges[1:], start=1):
        # The earlier range reaching furthest: vLLM compares with the one just before, which
        # finds the same schedules invalid but names fewer of the overlaps.
        reach = max(ranges[:position], key=lambda r: r[1])
        if current[0] <= reach[1]:
            fix = f"start it at {reach[1] + 1}, after [{reach[0]}, {reach[1]}, {reach[2]}] ends"
            findings.append(_invalid(current[3], current[:3], _DISJOINT, fix, overlaps=reach))
    # A range refused above may be the one meant to come first: judge the start only without one.
    if ranges and len(ranges) == len(_schedule(ctx)) and ranges[0][0] != 1:
        first = ranges[0]
        findings.append(_invalid(first[3], first[:3], _FROM_ONE, f"start it at 1 (not {first[0]})"))
    return findings


def _invalid(
    index: int,
    entry: tuple[int, int, int],
    condition: str,
    fix: str,
    *,
    overlaps: tuple[int, int, int, int] | None = None,
) -> Finding:
    start, end, k = entry
    said = condition.format(start=start, end=end, k=k)
    clash = f" (it overlaps [{overlaps[0]}, {overlaps[1]}, {overlaps[2]}])" if overlaps else ""
    field = f"{SCHEDULE_FIELD}[{index}]"
    return at_field(
        field,
        Finding.error(
            what=f"{field}=[{start}, {end}, {k}]{clash}: vLLM refuses it with '{said}'",
            why="vLLM builds the schedule when the engine core starts, and this raises there: "
            "the server exits before it serves",
            fix=f"edit {field}: {fix}",
        ),
    )


@rule(
    "engine.spec-schedule-clamped",
    source=f"{_V}v1/spec_decode/dynamic/utils.py#L104-L146 (every k is "
    "min(num_speculative_tokens, k)); "
    f"{_V}v1/core/sched/scheduler.py#L288 and #L310-L314 (num_speculative_tokens is the bound)",
    applies=_scheduled,
)
def schedule_stays_within_the_draft_length(ctx: CompatContext) -> list[Finding]:
    """num_speculative_tokens stays the largest draft vLLM sizes its buffers and CUDA graphs for;
    the scheduler takes min(num_speculative_tokens, k) for every batch size, so a range whose k is
    larger runs fewer draft tokens than the profile says. It serves correctly, hence a warning."""
    most = ctx.profile.proposer.num_speculative_tokens
    findings = []
    for index, (start, end, k) in enumerate(_schedule(ctx)):
        if k <= most:
            continue
        field = f"{SCHEDULE_FIELD}[{index}]"
        findings.append(
            at_field(
                field,
                Finding.warning(
                    what=f"{field}=[{start}, {end}, {k}]: k={k} is above "
                    f"proposer.num_speculative_tokens={most}",
                    why=f"vLLM clamps every scheduled k to num_speculative_tokens, so batch sizes "
                    f"{start}-{end} draft {most} tokens per step, not {k}",
                    fix=f"set the entry's k to at most {most}, or raise "
                    f"proposer.num_speculative_tokens to {k}",
                ),
            )
        )
    return findings


@rule(
    "engine.spec-schedule-data-parallel",
    source=f"{_V}config/vllm.py#L1058-L1075 (VllmConfig._maybe_disable_dynamic_sd_for_data_parallel,"
    " called from __post_init__ #L1787); orchestrator/engines/vllm.py (attention data-parallel "
    "groups are rendered as --data-parallel-size)",
    applies=lambda ctx: _scheduled(ctx) and ctx.profile.hardware.attention_data_parallel_size > 1,
)
def schedule_runs_without_data_parallelism(ctx: CompatContext) -> Finding | None:
    """With data_parallel_size > 1 vLLM drops the schedule when it builds its config (its
    data-parallel ranks could choose different draft lengths and deadlock) and logs a warning:
    every batch size then drafts num_speculative_tokens, including those the schedule turns
    speculation off for. It serves, at the static draft length, hence a warning."""
    groups = ctx.profile.hardware.attention_data_parallel_size
    most = ctx.profile.proposer.num_speculative_tokens
    return at_field(
        SCHEDULE_FIELD,
        Finding.warning(
            what=f"{SCHEDULE_FIELD} with hardware.attention_data_parallel_size={groups} "
            f"(vLLM --data-parallel-size {groups}): vLLM drops the schedule with data parallelism",
            why=f"every load then drafts proposer.num_speculative_tokens={most} tokens per step, "
            "also where the schedule lowers it or turns speculation off",
            fix=f"remove {SCHEDULE_FIELD} and pick one proposer.num_speculative_tokens for the "
            "load, or set hardware.attention_data_parallel_size: 1",
        ),
    )


def _scheduled_off_with_a_tight_budget(ctx: CompatContext) -> bool:
    profile = ctx.profile
    schedule = profile.proposer.num_speculative_tokens_per_batch_size or ()
    budget = profile.vllm.max_num_batched_tokens if profile.vllm is not None else None
    return (
        profile.proposer.method == "draft_model"
        and any(k == 0 for _start, _end, k in schedule)
        and budget is not None
        and budget < 2 * profile.serving.max_concurrency
    )


@rule(
    "engine.spec-schedule-off-budget",
    source=f"{_V}config/speculative.py#L1887-L1926 (max_num_new_slots_for_drafting: 1 for "
    f"draft_model); {_V}v1/core/sched/scheduler.py#L613 and #L857 (every scheduled request takes "
    "num_new_tokens + draft_slots of max_num_batched_tokens); measured on the CPU test bed: "
    "tests/e2e/test_tune_vllm.py",
    applies=lambda ctx: _scheduled(ctx) and _scheduled_off_with_a_tight_budget(ctx),
)
def schedule_off_is_not_the_baseline(ctx: CompatContext) -> Finding:
    """Where a schedule gives k = 0 it drafts nothing, but a draft_model config still costs each
    request vLLM schedules one more token of the step's budget (the draft model's input), so a
    step holds at most max_num_batched_tokens / 2 decodes where the target alone holds
    max_num_seqs. With a budget below twice max_num_seqs, the k = 0 ranges serve fewer requests
    at once than the baseline would: measured 0.70x of the baseline at concurrency 64 on the CPU
    test bed (64-token budget), the k = 0 range drafting nothing. It serves, slower: a warning."""
    profile = ctx.profile
    assert profile.vllm is not None and profile.vllm.max_num_batched_tokens is not None
    budget = profile.vllm.max_num_batched_tokens
    seqs = profile.serving.max_concurrency
    return at_field(
        SCHEDULE_FIELD,
        Finding.warning(
            what=f"{SCHEDULE_FIELD} turns speculation off (k = 0) with method draft_model and "
            f"vllm.max_num_batched_tokens={budget} below 2 x serving.max_concurrency={seqs}",
            why="vLLM 0.32.0 charges every request it schedules one more budget token for the "
            f"draft model's input, drafting or not, so a k = 0 step holds at most {budget // 2} "
            f"decodes where the target alone holds {min(seqs, budget)}: above the crossover this "
            "serves slower than the baseline it stands in for",
            fix=f"raise vllm.max_num_batched_tokens to at least {2 * seqs}, or leave "
            "speculation on at every load and serve the baseline twin above the crossover "
            "(deploy.baseline: true with policy.mode: switch)",
        ),
    )


RULES = (
    cpu_memory_fraction_is_modest,
    schedule_is_valid,
    schedule_stays_within_the_draft_length,
    schedule_runs_without_data_parallelism,
    schedule_off_is_not_the_baseline,
)
