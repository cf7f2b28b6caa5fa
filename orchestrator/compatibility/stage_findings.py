"""Finding ids that come from a planning stage rather than a rule function: the profile loader,
and the launch and manifest stages that refuse a plan they cannot render. `explain` documents
them beside the rules; they cannot be `--ignore`d, since nothing could be rendered."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

_SCHEMA = "the profile schema (`specdeploy schema`, profile.schema.json)"


@dataclass(frozen=True)
class StageFinding:
    """What one stage finding means and where its fact comes from."""

    doc: str
    source: str


STAGE_FINDINGS: Final[dict[str, StageFinding]] = {
    "profile.unknown-field": StageFinding(
        "A key the schema does not define, usually a typo; `did you mean` names the closest field.",
        _SCHEMA,
    ),
    "profile.duplicate-key": StageFinding(
        "A key given twice in one mapping; YAML would silently keep the last value.", _SCHEMA
    ),
    "profile.missing-field": StageFinding("A required field is absent.", _SCHEMA),
    "profile.invalid-value": StageFinding(
        "A value of the wrong type or outside its range, or fields that contradict each other.",
        _SCHEMA,
    ),
    "profile.yaml-syntax": StageFinding("The file is not valid YAML.", _SCHEMA),
    "profile.unreadable": StageFinding(
        "The profile file cannot be read (missing, not a regular file, not UTF-8).", _SCHEMA
    ),
    "profile.engine-version": StageFinding(
        "engine.version is older than the oldest release in the capability matrix.",
        "orchestrator/engines/capabilities.yaml",
    ),
    "engine.multi-node": StageFinding(
        "A replica whose TP x PP GPUs exceed hardware.gpus_per_node runs as a LeaderWorkerSet "
        "group of equal pods. That needs the GPUs to split evenly over the nodes, and an engine "
        "for which specdeploy renders the leader and worker commands (vLLM over Ray, SGLang with "
        "--nnodes); the manifest stage refuses any other shape.",
        "https://github.com/kubernetes-sigs/lws/blob/v0.7.0/docs/examples/vllm/GPU/lws.yaml; "
        "https://github.com/vllm-project/vllm/blob/v0.32.0/docs/deployment/frameworks/lws.md; "
        "https://github.com/sgl-project/sglang/blob/v0.5.23/docker/k8s-sglang-distributed-sts.yaml",
    ),
    "plan.stage": StageFinding(
        "A launch or manifest stage could not render the plan; the finding says why.",
        "orchestrator/plan/build.py",
    ),
}
