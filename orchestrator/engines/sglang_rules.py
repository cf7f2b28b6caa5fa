"""SGLang-only compatibility rules: the speculative tree settings the pinned release accepts.

Run only for profiles with engine.name: sglang (`SglangEngine.rules`).
"""

from __future__ import annotations

from orchestrator.compatibility.rule import CompatContext, Finding, rule

_SGLANG_DOCS = "sgl-project/sglang docs advanced_features/speculative_decoding (overlap scheduler)"


def _speculative_tree(ctx: CompatContext) -> bool:
    """EAGLE-family speculation (NGRAM derives its own tree shape)."""
    return ctx.profile.speculative and ctx.method != "ngram"


@rule(
    "engine.sglang-overlap-topk",
    source=_SGLANG_DOCS + "; sglang 0.5.11-0.5.23 wheels (SGLANG_ENABLE_SPEC_V2, then always V2)",
    applies=lambda ctx: _speculative_tree(ctx) and ctx.release.has("spec-overlap-scheduler"),
)
def sglang_overlap_needs_topk_one(ctx: CompatContext) -> Finding | None:
    """SGLang's overlap scheduler (on by default for speculative decoding from 0.5.11; before
    that speculation ran without it) supports only chain drafting (--speculative-eagle-topk 1);
    tree drafting must disable it."""
    tuning = ctx.profile.sglang
    if tuning is None or tuning.eagle_topk == 1 or tuning.disable_overlap_schedule:
        return None
    return Finding.error(
        what=(
            f"sglang.eagle_topk={tuning.eagle_topk} (tree drafting) with the overlap scheduler on "
            "(sglang.disable_overlap_schedule: false)"
        ),
        why="SGLang's overlap scheduler only supports --speculative-eagle-topk 1 and refuses the tree",
        fix="set sglang.disable_overlap_schedule: true, or sglang.eagle_topk: 1",
    )


@rule("engine.sglang-draft-tokens", source=_SGLANG_DOCS, applies=_speculative_tree)
def sglang_draft_tokens_are_consistent(ctx: CompatContext) -> Finding | None:
    """SGLang verifies num_draft_tokens per step: steps + 1 for a chain (it silently rewrites any
    other value), and between steps + 1 and topk x steps + 1 for a tree."""
    tuning = ctx.profile.sglang
    steps = ctx.profile.proposer.num_speculative_tokens
    topk = tuning.eagle_topk if tuning is not None else 1
    tokens = tuning.num_draft_tokens if tuning is not None else None
    if topk == 1:
        if tokens is None or tokens == steps + 1:
            return None
        return Finding.error(
            what=f"sglang.num_draft_tokens={tokens} but a chain (eagle_topk 1) of {steps} steps verifies {steps + 1}",
            why="SGLang silently replaces the value, so the deployment would not run what the profile says",
            fix=f"set sglang.num_draft_tokens: {steps + 1}, or remove it",
        )
    if tokens is None:
        return Finding.error(
            what=f"sglang.eagle_topk={topk} (tree drafting) without sglang.num_draft_tokens",
            why="SGLang needs steps, topk and draft tokens all set, or all unset",
            fix=f"set sglang.num_draft_tokens between {steps + 1} and {topk * steps + 1}",
        )
    if not steps + 1 <= tokens <= topk * steps + 1:
        return Finding.error(
            what=f"sglang.num_draft_tokens={tokens} outside [{steps + 1}, {topk * steps + 1}] for {steps} steps x topk {topk}",
            why="the draft tree cannot hold that many tokens (or holds fewer than one chain)",
            fix=f"set sglang.num_draft_tokens between {steps + 1} and {topk * steps + 1}",
        )
    return None


RULES = (sglang_overlap_needs_topk_one, sglang_draft_tokens_are_consistent)
