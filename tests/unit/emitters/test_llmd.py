"""llm-d: the overlay `render --platform llm-d` writes, built by a real `kubectl kustomize`, is
exactly what `apply --platform llm-d` applies; and the same overlay over llm-d's own published
multi-host recipe base (tests/fixtures/platforms/llm-d/) still runs exactly our launch, GPUs and
placement, with nothing of the base's placeholders left."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from orchestrator.deploy.dry_run_files import write_files
from orchestrator.emitters.base import emitter_for
from orchestrator.emitters.llmd import IMAGE_PLACEHOLDER
from tests.support import write_profile
from tests.unit.emitters.conftest import PLATFORM_FIXTURES, tool
from tests.unit.manifests.conftest import valid_plan, validate_object

SPLIT = {"baseline": True, "baseline_traffic_percent": 20, "gateway": "infra/inference"}
MULTI_NODE = {"tensor_parallel_size": 4, "pipeline_parallel_size": 4, "gpus_per_node": 4}
#: llm-d's multi-host recipe base (guides/recipes/modelserver/base/multi-host/default).
UPSTREAM_BASE = PLATFORM_FIXTURES / "llm-d" / "multi-host-default"


def kustomize(directory: Path) -> list[dict[str, Any]]:
    built = subprocess.run(
        [tool("kubectl"), "kustomize", str(directory)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert built.returncode == 0, built.stderr
    return [doc for doc in yaml.safe_load_all(built.stdout) if doc]


def _sorted(objects: Any) -> list[dict[str, Any]]:
    return sorted(objects, key=lambda o: (o["kind"], o["metadata"]["name"]))


def test_overlay_builds_to_what_apply_applies(tmp_path: Path) -> None:
    for name, deploy, hardware in (("single", SPLIT, {}), ("multi", {}, MULTI_NODE)):
        plan = valid_plan(write_profile(tmp_path, f"{name}.yaml", deploy=deploy, hardware=hardware))
        out = tmp_path / name
        write_files(emitter_for("llm-d").files(plan), out)
        applied = [m.body for m in emitter_for("llm-d").emit(plan)]
        assert _sorted(kustomize(out / "llm-d")) == _sorted(applied)


def test_overlay_over_llmds_own_recipe_base(tmp_path: Path) -> None:
    plan = valid_plan(write_profile(tmp_path, hardware=MULTI_NODE, deploy={"baseline": True}))
    out = tmp_path / "out"
    write_files(emitter_for("llm-d").files(plan), out)
    for variant in ("speculative", "baseline"):  # swap our base for llm-d's published one
        base = out / "llm-d" / variant / "base"
        shutil.rmtree(base)
        shutil.copytree(UPSTREAM_BASE, base)
        kustomization = {
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "resources": ["decode-deployment.yaml"],
        }
        (base / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    built = {o["metadata"]["name"]: o for o in kustomize(out / "llm-d")}
    applied = {m.name: m.body for m in emitter_for("llm-d").emit(plan)}
    assert IMAGE_PLACEHOLDER not in yaml.safe_dump(list(built.values()))
    for name in ("test-decode", "test-baseline-decode"):
        ours, theirs = applied[name]["spec"], built[name]["spec"]
        assert theirs["replicas"] == ours["replicas"]
        group, our_group = theirs["leaderWorkerTemplate"], ours["leaderWorkerTemplate"]
        assert group["size"] == our_group["size"] == 4  # not the base's 2
        for role in ("leaderTemplate", "workerTemplate"):
            (container,) = group[role]["spec"]["containers"]
            (our_container,) = our_group[role]["spec"]["containers"]
            for key in ("image", "command", "env", "resources", "volumeMounts"):
                assert container.get(key) == our_container.get(key), (name, role, key)
            assert container.get("args", []) == []  # the base's empty args stay empty
            pod, our_pod = group[role]["spec"], our_group[role]["spec"]
            for key in ("nodeSelector", "tolerations", "volumes"):
                assert pod.get(key) == our_pod.get(key), (name, role, key)
        leader = group["leaderTemplate"]["spec"]["containers"][0]
        our_leader = our_group["leaderTemplate"]["spec"]["containers"][0]
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert leader[probe] == our_leader[probe], probe  # ours replace the base's paths
        validate_object(built[name])
