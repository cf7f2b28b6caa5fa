"""What every platform emitter shares: options, the engines it can serve, the twins of a plan and
how a refusal reads.

A platform emitter reads the plan (launches and the manifest set decided when the profile was
planned) and lays the same facts out in that platform's own objects. It never re-plans: GPUs,
placement, probes, env and the audit annotations come from the plan's `VariantContext`s, the argv
from its launches. What a platform cannot express is refused before anything is written (exit 4),
saying what, why and how to fix it.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Final

from orchestrator.emitters.base import (
    ChartInstalls,
    Manifest,
    ResourceKind,
    manifest_files,
    sort_for_apply,
)
from orchestrator.engines.names import ENGINE_NAMES, EngineName
from orchestrator.errors import IncompatibleError, OrchestratorError

if TYPE_CHECKING:
    from orchestrator.engines.base import EngineLaunch
    from orchestrator.manifests.context import PodContext, VariantContext
    from orchestrator.plan.types import DeploymentPlan

#: The finding id of a profile a platform cannot carry.
PLATFORM_RULE: Final = "platform.unsupported"
#: Label every object of one A/B split carries, and the Gateway API group and kinds it uses.
GATEWAY_API_GROUP: Final = "gateway.networking.k8s.io"
INFERENCE_API_GROUP: Final = "inference.networking.k8s.io"


class PlatformOptionError(OrchestratorError):
    """A `--platform-option` the platform does not know (a usage error, exit 2)."""

    exit_code = 2


@dataclass(frozen=True)
class Twin:
    """One variant of the plan as a platform sees it: its manifest context, its in-container
    launch and, when the profile asks for an A/B split, its share of the traffic (percent)."""

    ctx: VariantContext
    launch: EngineLaunch
    weight: int | None

    @property
    def name(self) -> str:
        return str(self.ctx.metadata["name"])

    @property
    def baseline(self) -> bool:
        return self.ctx.variant == "baseline"


class PlatformEmitter:
    """Base of the platform emitters: option handling, the engine check, apply order."""

    name: ClassVar[str]
    kinds: ClassVar[tuple[ResourceKind, ...]]
    #: Engines this platform can run; a profile for another engine is refused at render.
    engines: ClassVar[frozenset[EngineName]] = frozenset(ENGINE_NAMES)
    #: Option name -> accepted values, the first being the default (`--platform-option K=V`).
    options: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    #: Whether the platform renders the A/B split of deploy.baseline_traffic_percent.
    splits_traffic: ClassVar[bool] = False
    #: Why an engine outside `engines` cannot run here (shown when refusing it).
    engine_gap: ClassVar[str] = ""

    def __init__(self, options: Mapping[str, str] | None = None) -> None:
        self.chosen = {key: values[0] for key, values in self.options.items()}
        for key, value in (options or {}).items():
            if key not in self.options:
                known = ", ".join(sorted(self.options)) or "none"
                near = difflib.get_close_matches(key, list(self.options), n=1)
                hint = f" (did you mean {near[0]!r}?)" if near else ""
                raise PlatformOptionError(
                    f"--platform-option {key}={value}: platform {self.name} has no option "
                    f"{key!r}{hint}",
                    why="an option the platform does not read would silently change nothing",
                    fix=f"use one of this platform's options ({known}), or drop it",
                )
            if value not in self.options[key]:
                raise PlatformOptionError(
                    f"--platform-option {key}={value}: not one of {list(self.options[key])}",
                    why=f"platform {self.name} renders only these {key} values",
                    fix=f"pass --platform-option {key}={self.options[key][0]} (the default) or "
                    f"another listed value",
                )
            self.chosen[key] = value

    def configured(self, options: Mapping[str, str]) -> PlatformEmitter:
        """This platform with `--platform-option` values applied (validated)."""
        return type(self)(options)

    def emit(self, plan: DeploymentPlan) -> list[Manifest]:
        self.check(plan)
        return sort_for_apply(self.build(plan), self.kinds)

    def files(self, plan: DeploymentPlan) -> dict[str, str]:
        return manifest_files(self.emit(plan))

    def chart_installs(
        self, plan: DeploymentPlan, *, values_dir: str, namespace: str | None = None
    ) -> ChartInstalls | None:
        """What a platform chart makes from the values `render` writes under `values_dir`, which
        neither `render`'s manifests nor `apply` carry; none here."""
        return None

    def build(self, plan: DeploymentPlan) -> list[Manifest]:
        """The platform's objects, in any order (`emit` sorts them)."""
        raise NotImplementedError

    def check(self, plan: DeploymentPlan) -> None:
        """Refuse what this platform cannot run, before anything is built."""
        engine = plan.profile.engine.name
        if engine not in self.engines:
            usable = " or ".join(sorted(self.engines))
            raise self.refusal(
                f"engine.name={engine}: platform {self.name} runs {usable} only",
                why=self.engine_gap or f"{self.name} has no way to start {engine}",
                fix=f"set engine.name: {usable}, or render --platform kubernetes or dynamo for "
                f"{engine}",
                field="engine.name",
            )
        if plan.profile.deploy.baseline_traffic_percent is not None and not self.splits_traffic:
            raise self.refusal(
                f"deploy.baseline_traffic_percent={plan.profile.deploy.baseline_traffic_percent}: "
                f"platform {self.name} has no weighted traffic split",
                why="the split would not happen, and the A/B would not measure what it says",
                fix="remove deploy.baseline_traffic_percent (each twin keeps its own endpoint), "
                "or render --platform kubernetes, kserve or llm-d",
                field="deploy.baseline_traffic_percent",
            )

    def refusal(self, what: str, *, why: str, fix: str, field: str = "") -> IncompatibleError:
        return IncompatibleError(what, why=why, fix=fix, rule=PLATFORM_RULE, field=field)

    def require_hub_models(self, plan: DeploymentPlan, how: str) -> None:
        """Refuse local checkpoint directories on platforms that fetch models themselves."""
        locations = [("target.model", plan.target_location)]
        if plan.draft_location is not None:
            locations.append(("proposer.model", plan.draft_location))
        for field, location in locations:
            if location.local_dir is not None:
                raise self.refusal(
                    f"{field}={location.ref} is a local directory; platform {self.name} "
                    f"fetches models {how}",
                    why="a path on this machine means nothing to the platform's pods",
                    fix=f"set {field} to a Hugging Face repository id, or render --platform "
                    "kubernetes (it mounts local directories from the node)",
                    field=field,
                )


def twins(plan: DeploymentPlan) -> list[Twin]:
    """The plan's variants (its own, then the baseline twin when there is one) with their
    in-container launches and A/B weights."""
    percent = plan.profile.deploy.baseline_traffic_percent
    out = []
    for ctx in plan.manifests.variants:
        baseline = ctx.variant == "baseline" and plan.profile.speculative
        weight = None
        if percent is not None:
            weight = percent if baseline else 100 - percent
        out.append(Twin(ctx, plan.launch_for(container=True, baseline=baseline), weight))
    return out


def drop_options(tokens: Sequence[str], names: Iterable[str]) -> list[str]:
    """`tokens` without the options named (each followed by one value), where the platform sets
    them itself."""
    names = frozenset(names)
    out: list[str] = []
    skip = False
    for token in tokens:
        if skip:
            skip = False
            continue
        if token in names:
            skip = True
            continue
        out.append(token)
    return out


def container(
    ctx: VariantContext, *, name: str, worker: bool = False, **fields: Any
) -> dict[str, Any]:
    """A container built from the plan's pod context: image, env (secrets referenced), GPU
    resources and volume mounts; `fields` adds or replaces keys (command, args, ports)."""
    pod = ctx.worker if worker and ctx.worker is not None else ctx.pod
    body: dict[str, Any] = {"name": name, "image": pod.image}
    if pod.env:
        body["env"] = [dict(e) for e in pod.env]
    if pod.resources:
        body["resources"] = {k: dict(v) for k, v in pod.resources.items()}
    if pod.volume_mounts:
        body["volumeMounts"] = [dict(m) for m in pod.volume_mounts]
    body.update(fields)
    return body


def pod_spec(pod: PodContext, containers: list[dict[str, Any]]) -> dict[str, Any]:
    """A pod spec around `containers` with the plan's model downloads (init containers, whose
    volumes the engine mounts at the directories its launch names: without them a TensorRT-LLM
    release that reads a head only from a directory finds it empty), node selector,
    tolerations and volumes."""
    spec: dict[str, Any] = {"containers": containers}
    if pod.init_containers:
        spec["initContainers"] = [dict(c) for c in pod.init_containers]
    if pod.node_selector:
        spec["nodeSelector"] = dict(pod.node_selector)
    if pod.tolerations:
        spec["tolerations"] = [dict(t) for t in pod.tolerations]
    if pod.volumes:
        spec["volumes"] = [dict(v) for v in pod.volumes]
    return spec


def metadata(ctx: VariantContext, name: str | None = None) -> dict[str, Any]:
    """The variant's object metadata (labels, audit annotations, namespace), optionally renamed."""
    meta = {k: v for k, v in ctx.metadata.items()}
    if name is not None:
        meta["name"] = name
    return meta


def probe(path: str, port: int | str, period: int, timeout: int, failures: int) -> dict[str, Any]:
    return {
        "httpGet": {"path": path, "port": port},
        "periodSeconds": period,
        "timeoutSeconds": timeout,
        "failureThreshold": failures,
    }
