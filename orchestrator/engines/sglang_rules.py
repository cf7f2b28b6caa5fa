"""SGLang-only compatibility rules: the speculative tree settings the pinned release accepts, per
release, from that release's code.

Run only for profiles with engine.name: sglang (`SglangEngine.rules`).
"""

from __future__ import annotations

from orchestrator.compatibility.rule import CompatContext, Finding, rule
from orchestrator.compatibility.schedule_rules import SCHEDULE_FIELD
from orchestrator.compatibility.unchecked import at_field
from orchestrator.engines.sglang_adaptive import (
    ADAPTIVE_DEFAULTS_SOURCE,
    ADAPTIVE_SOURCE,
    adaptive_launch,
    adaptive_unsupported,
)
from orchestrator.profile.schema import SglangAdaptive

#: Where the tree's largest size comes from: the draft keeps the `num_draft_tokens - 1` best of
#: `topk + (steps - 1) x topk^2` scored candidates (torch.topk over them), since SGLang's first
#: EAGLE tree code.
_TREE_SOURCE = (
    "https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/speculative/"
    "eagle_utils.py#L100-L110; https://github.com/sgl-project/sglang/blob/v0.4.9/python/sglang/"
    "srt/speculative/build_eagle_tree.py#L24-L30; chain rewrite: "
    "https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/arg_groups/"
    "speculative_hook.py#L1255-L1266"
)


def _speculative_tree(ctx: CompatContext) -> bool:
    """EAGLE-family speculation (NGRAM derives its own tree shape)."""
    return ctx.profile.speculative and ctx.method != "ngram"


@rule(
    "engine.sglang-overlap-topk",
    source="https://github.com/sgl-project/sglang/blob/v0.5.11/python/sglang/srt/server_args.py"
    "#L3460-L3483 (0.5.11-0.5.12: 'spec v2 currently only supports topk = 1'); "
    "https://github.com/sgl-project/sglang/blob/v0.5.13/python/sglang/srt/speculative/"
    "spec_info.py#L192-L205 (0.5.13 on: the V2 worker drafts trees)",
    applies=lambda ctx: (
        _speculative_tree(ctx)
        and ctx.release.has("spec-overlap-scheduler")
        and not ctx.release.has("spec-v2-trees")
    ),
)
def sglang_overlap_needs_topk_one(ctx: CompatContext) -> Finding | None:
    """SGLang 0.5.11 and 0.5.12 run speculation with the overlap scheduler by default, but their
    overlap (spec v2) path drafts chains only: with --speculative-eagle-topk > 1 they turn the
    overlap scheduler off themselves and run spec v1, with a log line. The deployment serves
    correctly, slower than the profile suggests. Before 0.5.11 speculation never overlapped;
    from 0.5.13 the V2 worker drafts trees, overlapped or not."""
    tuning = ctx.profile.sglang
    if tuning is None or tuning.eagle_topk == 1 or tuning.disable_overlap_schedule:
        return None
    return Finding.warning(
        what=(
            f"sglang.eagle_topk={tuning.eagle_topk} (tree drafting) with the overlap scheduler on "
            f"in SGLang {ctx.release.version}"
        ),
        why="this release turns the overlap scheduler off for trees and runs the slower spec v1 "
        "path; the profile does not say so",
        fix="set sglang.disable_overlap_schedule: true to say what runs, sglang.eagle_topk: 1 "
        "to keep the overlap scheduler, or engine.version: 0.5.13 or newer",
    )


@rule("engine.sglang-draft-tokens", source=_TREE_SOURCE, applies=_speculative_tree)
def sglang_draft_tokens_are_consistent(ctx: CompatContext) -> Finding | None:
    """SGLang verifies num_draft_tokens per step. A chain (topk 1) verifies steps + 1: any other
    value is silently rewritten to that. A tree keeps the num_draft_tokens - 1 best-scored of its
    topk + (steps - 1) x topk^2 candidates, so more than 1 + topk + (steps - 1) x topk^2 fails
    when the first batch is drafted."""
    tuning = ctx.profile.sglang
    steps = ctx.profile.proposer.num_speculative_tokens
    topk = tuning.eagle_topk if tuning is not None else 1
    tokens = tuning.num_draft_tokens if tuning is not None else None
    if topk == 1:
        if tokens is None or tokens == steps + 1:
            return None
        return Finding.warning(
            what=f"sglang.num_draft_tokens={tokens} but a chain (eagle_topk 1) of {steps} steps verifies {steps + 1}",
            why="SGLang replaces the value with steps + 1 (a log line), so the deployment does not "
            "run what the profile says",
            fix=f"set sglang.num_draft_tokens: {steps + 1}, or remove it",
        )
    largest = 1 + topk + (steps - 1) * topk * topk
    if tokens is None:
        return Finding.warning(
            what=(
                f"sglang.eagle_topk={topk} (tree drafting) without sglang.num_draft_tokens: "
                f"specdeploy renders {steps + 1} (steps + 1)"
            ),
            why=f"the tree then verifies only {steps} of its candidates per step, about what a "
            "chain would, at the cost of drafting the whole tree",
            fix=f"set sglang.num_draft_tokens (at most {largest}; SGLang's EAGLE-3 example uses "
            "16 for 3 steps x topk 4)",
        )
    if tokens > largest:
        return Finding.error(
            what=(
                f"sglang.num_draft_tokens={tokens} but {steps} steps x topk {topk} draft at most "
                f"{largest} (1 + {topk} + {steps - 1} x {topk}^2)"
            ),
            why="the tree has fewer candidates than asked for: drafting fails on the first batch",
            fix=f"set sglang.num_draft_tokens to at most {largest}",
        )
    return None


def _adaptive(ctx: CompatContext) -> SglangAdaptive | None:
    return ctx.profile.sglang.adaptive if ctx.profile.sglang is not None else None


@rule(
    "engine.sglang-schedule-adapts",
    source=ADAPTIVE_SOURCE,
    applies=lambda ctx: (
        ctx.profile.speculative
        and (
            ctx.profile.proposer.num_speculative_tokens_per_batch_size is not None
            or _adaptive(ctx) is not None
        )
        and ctx.release.has("spec-batch-size-schedule")
    ),
)
def sglang_schedule_adapts(ctx: CompatContext) -> Finding | None:
    """SGLang runs a draft length per batch size, or one that follows the acceptance
    (sglang.adaptive), through --speculative-adaptive, which only EAGLE, EAGLE3 and NEXTN chains
    (topk 1) without attention data parallelism use. For anything else it logs a warning and runs
    one draft length at every load: the deployment serves correctly, but not at the draft
    lengths the profile asks for, so specdeploy renders the fixed proposer.num_speculative_tokens
    and says so."""
    reason = adaptive_unsupported(ctx.profile)
    if reason is None:
        return None
    k = ctx.profile.proposer.num_speculative_tokens
    field = "sglang.adaptive" if _adaptive(ctx) is not None else SCHEDULE_FIELD
    return at_field(
        field,
        Finding.warning(
            what=f"{field} on SGLang {ctx.release.version}: {reason}",
            why=f"SGLang falls back to one draft length, so the launch runs k={k} at every load "
            f"and {field} is not used",
            fix=f"remove {field} and set proposer.num_speculative_tokens to the k for the load "
            "you expect, or use method eagle, eagle3 or mtp with sglang.eagle_topk: 1 and no "
            "attention data parallelism",
        ),
    )


@rule(
    "engine.sglang-adaptive-config",
    source=f"{ADAPTIVE_SOURCE}; {ADAPTIVE_DEFAULTS_SOURCE}",
    applies=lambda ctx: ctx.profile.speculative and _adaptive(ctx) is not None,
)
def sglang_adaptive_config_is_served(ctx: CompatContext) -> list[Finding]:
    """sglang.adaptive as the pinned release serves it. SGLang refuses to start when
    --speculative-num-steps (proposer.num_speculative_tokens, where every slot starts) is not
    one of the slots' candidate draft lengths (`_init_adaptive_speculative_params`). A schedule
    (proposer.num_speculative_tokens_per_batch_size) is rendered as the same config file, so the
    two cannot both be set. The config was read in SGLang 0.5.23 only: on another release it is
    a warning that says so."""
    adaptive = _adaptive(ctx)
    if adaptive is None:
        return []
    findings: list[Finding] = []
    if not ctx.release.has("spec-batch-size-schedule"):
        findings.append(
            Finding.warning(
                what=f"sglang.adaptive on SGLang {ctx.release.version}: not verified "
                "(specdeploy read --speculative-adaptive and its config in SGLang 0.5.23 only)",
                why="a release without the flag refuses the launch; one with another config "
                "format may refuse the file or read it differently",
                fix="set engine.version: 0.5.23; once this release's adaptive config is known "
                "to match, pass --ignore engine.sglang-adaptive-config",
            )
        )
    if ctx.profile.proposer.num_speculative_tokens_per_batch_size is not None:
        findings.append(
            Finding.error(
                what="sglang.adaptive and proposer.num_speculative_tokens_per_batch_size are "
                "both set",
                why="both are SGLang's --speculative-adaptive-config: specdeploy would render "
                "one and drop the other",
                fix="keep sglang.adaptive for a draft length that follows the acceptance, or "
                "the schedule for one fixed per load",
            )
        )
    launch = adaptive_launch(ctx.profile)
    k = ctx.profile.proposer.num_speculative_tokens
    if launch is not None and k not in launch.candidate_steps:
        where = "sglang.adaptive.slots" if adaptive.slots else "SGLang's default config"
        steps = ", ".join(map(str, launch.candidate_steps))
        findings.append(
            Finding.error(
                what=f"proposer.num_speculative_tokens={k} is not a candidate draft length of "
                f"{where} ({steps})",
                why="SGLang starts every slot at --speculative-num-steps and refuses to start "
                "when it is not among the candidates",
                fix=f"set proposer.num_speculative_tokens to one of {steps}, or add {k} to a "
                "slot's candidate_steps",
            )
        )
    return [at_field("sglang.adaptive", finding) for finding in findings]


RULES = (
    sglang_overlap_needs_topk_one,
    sglang_draft_tokens_are_consistent,
    sglang_schedule_adapts,
    sglang_adaptive_config_is_served,
)
