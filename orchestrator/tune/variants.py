"""The profile tune serves for each draft length: PROFILE with `num_speculative_tokens` = k (its
schedule dropped), and the target alone as the baseline (k = 0). Each is planned before anything
starts, so a k the proposer or release refuses is reported up front (exit 3/4), not after an hour
of cells."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.errors import IncompatibleError, ProfileError
from orchestrator.plan.types import DeploymentPlan


def variant_plans(
    path: Path,
    plan: DeploymentPlan,
    ks: tuple[int, ...],
    *,
    offline: bool,
    how: str,
    named: bool = False,
    baseline: bool = False,
) -> dict[int, DeploymentPlan]:
    """k -> the plan of the profile served for it; with `baseline`, also 0 -> the target alone's.
    With `named` each gets its own metadata.name, `<name>-tune-k<k>` and `<name>-tune-baseline`,
    so that the arms and the profile's own deployment never share an object. `how` says what
    serves them, for errors."""
    from pydantic import ValidationError

    from orchestrator.plan.build import plan_profile
    from orchestrator.plan.resolver import LocalCheckpoints
    from orchestrator.profile.schema import Profile

    source = LocalCheckpoints(base_dir=path.resolve().parent, offline=offline)
    plans: dict[int, DeploymentPlan] = {}
    for k in (0, *ks) if baseline else ks:
        document: dict[str, Any] = plan.profile.model_dump(mode="json")
        if named:
            suffix = f"-tune-k{k}" if k else "-tune-baseline"
            document["metadata"]["name"] = document["metadata"]["name"] + suffix
        document.pop("policy", None)  # the operator's; an arm is measured, not steered
        document.setdefault("deploy", {})["baseline"] = False
        if k:
            document["proposer"]["num_speculative_tokens"] = k
            document["proposer"].pop("num_speculative_tokens_per_batch_size", None)
        else:
            document["proposer"] = {"method": "none"}
        where = f"{path} with proposer.num_speculative_tokens {k}" if k else f"{path}'s baseline"
        try:
            variant = Profile.model_validate(document)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()
            )
            raise ProfileError(
                f"{where}: {problems}",
                why=f"{how} serves the profile with each k of --k, and the target alone",
                fix="leave that k out of --k" if k else "shorten metadata.name",
                field="proposer.num_speculative_tokens" if k else "metadata.name",
            ) from None
        planned = plan_profile(variant, source, profile_path=path)
        if not isinstance(planned, DeploymentPlan):
            first = planned.errors[0]
            raise IncompatibleError(
                f"{where}: {first.rule}: {first.what}",
                why=f"{how} serves the profile with each k of --k, and this one does not validate",
                fix="leave that k out of --k, or change the profile so it validates with it",
            )
        plans[k] = planned
    return plans
