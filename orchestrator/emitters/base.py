"""Emitter seam: a platform turns a `DeploymentPlan` into the objects it deploys.

An emitter declares the kinds it produces, in apply order (what others reference first; delete
goes in reverse), and which of them are workloads whose readiness `status` reports. `render`
writes what `files()` returns; `apply`, `status` and `delete` work from `kinds`. Adding a
platform is one module in `orchestrator/emitters/` and one line in `EMITTER_CLASSES`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Final, Protocol

import yaml

from orchestrator.datafiles import SAFE_LOADER
from orchestrator.registry import LazyRegistry

if TYPE_CHECKING:
    from orchestrator.plan.types import DeploymentPlan

#: The file listing the objects of `render --out DIR` in apply order (DESIGN §4).
APPLY_ORDER_FILE: Final = "k8s/apply-order.txt"


@dataclass(frozen=True)
class ResourceKind:
    """One kind an emitter produces."""

    api_version: str
    kind: str
    workload: bool = False
    """Its readiness is what `status` reports (Deployments, LeaderWorkerSets, custom resources
    with a Ready condition)."""
    ready_condition: str | None = None
    """For a custom resource: the status condition type that says it serves (e.g. "Ready");
    None for kinds whose readiness is readyReplicas."""
    ready_means: str = ""
    """What that condition covers on this platform, shown by `status` while it is not True."""


@dataclass(frozen=True)
class ChartInstalls:
    """Objects a platform's own Helm chart makes from values `render` writes, and how to
    install them: `apply` applies everything else and prints this."""

    what: str
    """The objects, as a noun phrase ("each twin's InferencePool and its endpoint picker")."""
    why: str
    """Why specdeploy leaves them to the chart, and what fails until they are installed."""
    commands: tuple[str, ...]
    """One `helm install` line per release."""


class ManifestError(ValueError):
    """An emitter produced something that is not a Kubernetes object (a bug in the emitter)."""


@dataclass(frozen=True)
class Manifest:
    """One Kubernetes object as emitted, with what produced it (a template, an emitter)."""

    body: dict[str, Any]
    source: str

    @classmethod
    def parse(cls, doc: object, *, source: str) -> Manifest:
        """Check that a parsed YAML document is an object Kubernetes can identify."""
        if not isinstance(doc, dict):
            raise ManifestError(f"{source} produced a {type(doc).__name__}, not a mapping")
        for key in ("apiVersion", "kind"):
            if not isinstance(doc.get(key), str) or not doc[key]:
                raise ManifestError(f"{source} produced a document without {key}")
        metadata = doc.get("metadata")
        if not isinstance(metadata, dict) or not isinstance(metadata.get("name"), str):
            raise ManifestError(f"{source} produced a document without metadata.name")
        return cls(body=doc, source=source)

    @property
    def kind(self) -> str:
        return str(self.body["kind"])

    @property
    def api_version(self) -> str:
        return str(self.body["apiVersion"])

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])

    @property
    def namespace(self) -> str | None:
        value = self.body["metadata"].get("namespace")
        return None if value is None else str(value)

    @property
    def filename(self) -> str:
        """`k8s/<kind>-<name>.yaml`, the DESIGN §4 contract."""
        return f"k8s/{self.kind.lower()}-{self.name}.yaml"


class Emitter(Protocol):
    """One platform's view of a deployment plan."""

    name: ClassVar[str]
    #: Every kind this platform's objects have, in apply order.
    kinds: ClassVar[tuple[ResourceKind, ...]]

    def emit(self, plan: DeploymentPlan) -> list[Manifest]:
        """The objects for this plan, in apply order."""
        ...

    def files(self, plan: DeploymentPlan) -> dict[str, str]:
        """What `render --out DIR` writes for this platform: relative path -> content."""
        ...

    def chart_installs(
        self, plan: DeploymentPlan, *, values_dir: str, namespace: str | None = None
    ) -> ChartInstalls | None:
        """What a platform chart makes from the values `render` writes under `values_dir`, which
        `apply` does not apply, and the `helm install` lines; None when there is nothing."""
        ...

    def configured(self, options: Mapping[str, str]) -> Emitter:
        """This platform with `--platform-option KEY=VALUE` settings applied."""
        ...


def sort_for_apply(manifests: list[Manifest], kinds: tuple[ResourceKind, ...]) -> list[Manifest]:
    """Stable sort by the emitter's kind order, so referenced objects exist before what
    references them (lightkube's `sort_objects` idea); unknown kinds go last."""
    rank = {kind.kind: i for i, kind in enumerate(kinds)}
    return sorted(manifests, key=lambda m: rank.get(m.kind, len(rank)))


def manifest_files(manifests: list[Manifest]) -> dict[str, str]:
    """`k8s/<kind>-<name>.yaml` per object, plus `k8s/apply-order.txt` listing them in order."""
    files = {m.filename: canonical_yaml(m.body) for m in manifests}
    order = [m.filename.removeprefix("k8s/") for m in manifests]
    files[APPLY_ORDER_FILE] = "".join(f"{name}\n" for name in order)
    return files


def canonical_yaml(body: dict[str, Any]) -> str:
    """The one on-disk form of an object: block YAML with sorted keys (golden-file friendly), in
    UTF-8, without YAML anchors. PyYAML writes a NEL (U+0085) raw into a quoted scalar when it
    may use Unicode, and reading that back folds it into a space; an object that does not read
    back as itself is written with every non-ASCII character escaped instead (\\U escapes,
    never surrogates)."""
    text = _dump(body, unicode=True)
    if yaml.load(text, Loader=SAFE_LOADER) == body:
        return text
    return _dump(body, unicode=False)


def _dump(body: dict[str, Any], *, unicode: bool) -> str:
    return yaml.dump(
        body,
        Dumper=_NoAliasDumper,
        sort_keys=True,
        default_flow_style=False,
        width=1_000_000,
        allow_unicode=unicode,
    )


class _NoAliasDumper(yaml.SafeDumper):
    """Writes a value that appears twice in full both times (no `&id001` anchors)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


#: Platform name -> (module, class); a module is imported on first use.
EMITTER_CLASSES: Final[Mapping[str, tuple[str, str]]] = {
    "kubernetes": ("orchestrator.emitters.kubernetes", "KubernetesEmitter"),
    "kserve": ("orchestrator.emitters.kserve", "KserveEmitter"),
    "kserve-runtime": ("orchestrator.emitters.kserve_runtime", "KserveRuntimeEmitter"),
    "llm-d": ("orchestrator.emitters.llmd", "LlmdEmitter"),
    "kaito": ("orchestrator.emitters.kaito", "KaitoEmitter"),
    "production-stack": ("orchestrator.emitters.production_stack", "ProductionStackEmitter"),
    "dynamo": ("orchestrator.emitters.dynamo", "DynamoEmitter"),
}


EMITTERS: Final[Mapping[str, Emitter]] = LazyRegistry("platform", EMITTER_CLASSES)


def emitter_for(platform: str, options: Mapping[str, str] | None = None) -> Emitter:
    """The emitter of a platform, with `--platform-option` settings when there are any."""
    emitter = EMITTERS[platform]
    return emitter.configured(options) if options else emitter
