"""The CLI's Kubernetes flows on the e2e suite's cluster (issue 20 §4): the imitation in the
default run, a real cluster with SPECDEPLOY_E2E_KUBECONFIG, unchanged. Each test works in its own
namespace; the platforms' published CRDs come from the referees directory (a skip naming the file
where it is absent).

- apply creates, a second apply and `--server-dry-run` report every object `unchanged` with no
  diff (the server drops empty lists on built-in kinds: the diff must not see a change);
- status exits 8 while nothing is ready and names why;
- delete removes exactly what apply created, by label;
- every platform's objects of an example profile pass `apply --platform P --server-dry-run`
  against its published CRD, and so do those of every example profile a platform renders (the
  ones it refuses are skipped with the refusal: `render --platform` exits 3 or 4 for them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from orchestrator.cli import cli
from orchestrator.emitters.kaito import KAITO_VLLM_VERSION
from orchestrator.errors import EXIT_NOT_READY
from tests.kube.cluster import Cluster
from tests.kube.fixtures import kubeconfig_env
from tests.support import EXAMPLE_PROFILES, REPO_ROOT

DRAFT = REPO_ROOT / "profiles" / "vllm-qwen3-4b-draft.yaml"


def _profile(tmp_path: Path, namespace: str, **changes: Any) -> Path:
    """The example profile, moved into the test's namespace."""
    document = yaml.safe_load(DRAFT.read_text())
    document["metadata"]["namespace"] = namespace
    for block, values in changes.items():
        document[block] = {**(document.get(block) or {}), **values}
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def run(kube: Cluster, *args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env=kubeconfig_env(kube.kubeconfig))


def _labelled(kube: Cluster, namespace: str) -> list[tuple[str, str]]:
    found = []
    for api_version, kind in (("apps/v1", "Deployment"), ("v1", "Service"), ("v1", "ConfigMap")):
        for item in kube.list(api_version, kind, namespace, "specdeploy.io/profile"):
            found.append((kind, item["metadata"]["name"]))
    return sorted(found)


def test_apply_twice_is_unchanged_status_waits_delete_cleans(
    kube: Cluster, kube_namespace: str, tmp_path: Path
) -> None:
    profile = str(_profile(tmp_path, kube_namespace))
    first = run(kube, "apply", profile, "--offline")
    assert first.exit_code == 0, first.output
    assert "created" in first.output
    created = _labelled(kube, kube_namespace)
    assert ("Deployment", "qwen3-4b-draft") in created

    for extra in ((), ("--server-dry-run",)):
        again = run(kube, "apply", profile, "--offline", *extra)
        assert again.exit_code == 0, again.output
        assert "configured" not in again.output and "created" not in again.output, again.output
        assert "unchanged" in again.output
        assert "+++ applied/" not in again.output, again.output  # no diff shown

    kube.settle()
    shown = run(kube, "status", profile)
    assert shown.exit_code == EXIT_NOT_READY, shown.output
    assert "Deployment/qwen3-4b-draft" in shown.output

    gone = run(kube, "delete", profile)
    assert gone.exit_code == 0, gone.output
    assert "deployment/qwen3-4b-draft deleted" in gone.output
    kube.wait_for("the labelled objects to go", lambda: _labelled(kube, kube_namespace) == [])


#: What a platform imposes on any vLLM profile it runs, whatever the profile says.
IMPOSED: dict[str, dict[str, Any]] = {"kaito": {"engine": {"version": KAITO_VLLM_VERSION}}}
Platform = tuple[str, tuple[str, ...], dict[str, Any], tuple[str, ...]]
#: (platform, the referee CRDs it needs, profile changes, platform options)
PLATFORMS: list[Platform] = [
    ("kubernetes", ("gateway-api",), {"deploy": {"baseline_traffic_percent": 20}}, ()),
    ("kserve", ("kserve", "gateway-api"), {}, ()),
    ("kserve-runtime", ("kserve",), {}, ()),
    ("llm-d", ("gateway-api-inference-extension", "gateway-api"), {}, ()),
    # Kaito v0.12.0 runs its own image (vLLM 0.25.1), and an L40S has no SKU it provisions
    ("kaito", ("kaito",), IMPOSED["kaito"], ("nodes=existing",)),
]


@pytest.mark.parametrize(
    ("platform", "crds", "changes", "options"), PLATFORMS, ids=[p[0] for p in PLATFORMS]
)
def test_each_platforms_objects_pass_a_server_dry_run(
    kube: Cluster,
    kube_namespace: str,
    tmp_path: Path,
    platform: str,
    crds: tuple[str, ...],
    changes: dict[str, Any],
    options: tuple[str, ...],
) -> None:
    kube.install_platform_crds(*crds)
    profile = str(_profile(tmp_path, kube_namespace, **changes))
    args: tuple[str, ...] = (
        "apply",
        profile,
        "--platform",
        platform,
        "--server-dry-run",
        "--offline",
    )
    args += tuple(arg for option in options for arg in ("--platform-option", option))
    dry = run(kube, *args)
    assert dry.exit_code == 0, dry.output
    assert "created" in dry.output  # what a real apply would do
    assert _labelled(kube, kube_namespace) == []  # and a dry run persisted nothing
    if kube.imitation is not None:
        assert kube.imitation.pruned == [], kube.imitation.pruned  # no field the CRD drops


def _every_example(platform: Platform) -> Any:
    return [pytest.param(platform, p, id=f"{platform[0]}-{p.stem}") for p in EXAMPLE_PROFILES]


@pytest.mark.parametrize(
    ("platform", "example"),
    [case for platform in PLATFORMS for case in _every_example(platform)],
)
def test_every_example_profile_a_platform_renders_passes_a_server_dry_run(
    kube: Cluster,
    kube_namespace: str,
    tmp_path: Path,
    platform: Platform,
    example: Path,
) -> None:
    """Issue 22's acceptance: all platform objects of all example profiles, as a real server
    takes them, with nothing a structural schema would prune. Each profile is taken as written,
    but for what the platform imposes (Kaito runs its own vLLM release); anything the platform
    refuses is skipped, saying why (the refusals themselves are tested in tests/unit/emitters)."""
    name, crds, _, options = platform
    document = yaml.safe_load(example.read_text())
    document["metadata"]["namespace"] = kube_namespace
    if document["engine"]["name"] == "vllm":
        for block, values in IMPOSED.get(name, {}).items():
            document[block] = {**(document.get(block) or {}), **values}
    profile = tmp_path / example.name
    profile.write_text(yaml.safe_dump(document, sort_keys=False))
    chosen = tuple(arg for option in options for arg in ("--platform-option", option))
    rendered = run(kube, "render", str(profile), "--platform", name, "--offline",
                   "--out", str(tmp_path / "out"), *chosen)  # fmt: skip
    if rendered.exit_code in (3, 4):
        lines = rendered.output.splitlines()
        refusal = next((x for x in lines if x.startswith(("Error", "what:"))), "")
        pytest.skip(f"{name} refuses {example.name}: {refusal.strip() or rendered.output[-300:]}")
    assert rendered.exit_code == 0, rendered.output
    kube.install_platform_crds(*crds)
    dry = run(kube, "apply", str(profile), "--platform", name, "--server-dry-run", "--offline",
              *chosen)  # fmt: skip
    assert dry.exit_code == 0, dry.output
    assert "created" in dry.output
    assert _labelled(kube, kube_namespace) == []
    if kube.imitation is not None:
        assert kube.imitation.pruned == [], kube.imitation.pruned
