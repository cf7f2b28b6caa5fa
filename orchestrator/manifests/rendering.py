"""Render, then parse, then check: Jinja2 templates -> YAML -> Manifest objects in apply order.

Templates live in `<repo>/templates/kubernetes` (shipped in the wheel as
`orchestrator/_templates`); `templates_dir()` is the one place that finds them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Final

import jinja2
import markupsafe
import yaml
from jinja2.utils import htmlsafe_json_dumps

from orchestrator.manifests.context import (
    ManifestSet,
    ModelCache,
    build_manifest_set,
    profile_model_cache,
)
from orchestrator.pipeline import DeploymentPlan

#: Apply order by kind (lightkube's sort_objects rank): what others reference comes first.
APPLY_RANK: Final[dict[str, int]] = {
    "Namespace": 0,
    "Secret": 1,
    "ConfigMap": 2,
    "PersistentVolumeClaim": 3,
    "Service": 4,
    "Deployment": 5,
    "LeaderWorkerSet": 6,
}
#: Template per workload kind, plus the ones every variant gets.
WORKLOAD_TEMPLATE: Final[dict[str, str]] = {
    "Deployment": "deployment",
    "LeaderWorkerSet": "leaderworkerset",
}
APPLY_ORDER_FILE: Final = "k8s/apply-order.txt"


class ManifestError(ValueError):
    """A template produced something that is not a Kubernetes object (a bug in a template)."""


@dataclass(frozen=True)
class Manifest:
    """One Kubernetes object as rendered, with the template it came from."""

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


def templates_dir() -> Path:
    """The templates directory: the repo checkout's, else the copy inside the installed wheel."""
    package_root = Path(__file__).resolve().parent.parent
    for candidate in (package_root.parent / "templates", package_root / "_templates"):
        if (candidate / "kubernetes").is_dir():
            return candidate
    raise FileNotFoundError(f"no templates/kubernetes beside {package_root}")


@cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates_dir() / "kubernetes"),
        undefined=jinja2.StrictUndefined,  # a misspelt value is an error, not an empty string
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["tojson"] = _tojson
    return env


def _tojson(value: Any) -> markupsafe.Markup:
    """Jinja's tojson (JSON is YAML; `<>&'` escaped), but a missing value is an UndefinedError
    naming it instead of a TypeError from the JSON encoder."""
    if isinstance(value, jinja2.Undefined):
        value._fail_with_undefined_error()
    return htmlsafe_json_dumps(value, sort_keys=True)


def render_manifests(manifests: ManifestSet) -> list[Manifest]:
    """Every object for one profile, parsed and checked, in apply order."""
    rendered: list[Manifest] = []
    values = manifests.values()
    if values["modelCache"] is not None:
        rendered += _render("persistentvolumeclaim", cache=values["modelCache"])
    for ctx in values["variants"]:
        if ctx["configMap"] is not None:
            rendered += _render("configmap", ctx=ctx)
        rendered += _render("service", ctx=ctx)
        rendered += _render(WORKLOAD_TEMPLATE[ctx["workloadKind"]], ctx=ctx)
    return sort_for_apply(rendered)


def sort_for_apply(manifests: list[Manifest]) -> list[Manifest]:
    """Stable sort by kind rank, so referenced objects exist before what references them."""
    return sorted(manifests, key=lambda m: APPLY_RANK.get(m.kind, len(APPLY_RANK)))


def canonical_yaml(body: dict[str, Any]) -> str:
    """The one on-disk form of an object: block YAML with sorted keys (golden-file friendly)."""
    return yaml.safe_dump(body, sort_keys=True, default_flow_style=False, width=1_000_000)


def manifests_for(plan: DeploymentPlan, *, cache: ModelCache | None = None) -> list[Manifest]:
    """Render the manifests of a valid plan."""
    return render_manifests(build_manifest_set(plan, cache=cache))


def manifest_files(plan: DeploymentPlan, *, cache: ModelCache | None = None) -> dict[str, str]:
    """`k8s/<kind>-<name>.yaml` per object, plus `k8s/apply-order.txt` listing them in order.

    Without `cache`, the profile's `deploy.model_cache` is used once the schema has it."""
    if cache is None and plan.profile is not None:
        cache = profile_model_cache(plan.profile)
    manifests = manifests_for(plan, cache=cache)
    files = {m.filename: canonical_yaml(m.body) for m in manifests}
    order = [m.filename.removeprefix("k8s/") for m in manifests]
    files[APPLY_ORDER_FILE] = "".join(f"{name}\n" for name in order)
    return files


def _render(template: str, **values: Any) -> list[Manifest]:
    source = f"templates/kubernetes/{template}.yaml.j2"
    try:
        text = _environment().get_template(f"{template}.yaml.j2").render(**values)
    except jinja2.UndefinedError as exc:
        raise ManifestError(f"{source} uses a value the context does not have: {exc}") from exc
    try:
        documents = list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        raise ManifestError(f"{source} produced invalid YAML: {exc}") from exc
    return [Manifest.parse(doc, source=source) for doc in documents if doc is not None]
