"""Adding a fourth engine touches only orchestrator/engines/ (docs/adding-an-engine.md).

A copy of the package gets a toy engine by edits under engines/ alone; then the real CLI, run from
that copy, validates, plans and renders a profile for it, and explains its own rule.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tests.support import REPO_ROOT, profile_dict

TOY_MODULE = '''"""A toy engine: `toy-serve MODEL --port P --memory F` (test only)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from orchestrator.compatibility.rule import CompatContext, Finding, Rule, rule
from orchestrator.engines.base import Collectives, EngineLaunch, LaunchSpec, ScheduleSupport
from orchestrator.engines.metrics import Acceptance, NoPhaseTimes, Samples, delta
from orchestrator.memory.knobs import round_down_fraction
from orchestrator.memory.kv import StateSlots
from orchestrator.memory.weights import WeightSharding


class ToyMemory:
    knob: ClassVar[str] = "memory"

    def knob_without_estimate(self, profile):
        return round_down_fraction(profile.serving.gpu_memory_fraction)

    def knob_for(self, estimate):
        return round_down_fraction(estimate.gpu_memory_fraction)

    def kv_gib_at(self, estimate, knob):
        weights = estimate.target_weights_gib + estimate.draft_weights_gib
        return estimate.gpu_usable_gib * knob - weights - estimate.overheads.total_gib

    def profiled_tokens(self, profile, gpu):
        return 4096

    def sampler_bytes_per_logit(self, profile):
        return 8

    def cuda_graph_gib(self, profile, target, gpu):
        return 0.0

    def graphs_in_budget(self, profile):
        return True

    def weight_sharding(self, profile):
        return WeightSharding.tensor_parallel(profile.hardware.tensor_parallel_size)

    def non_torch_gib(self, profile):
        return 0.3

    def collectives(self, profile, target, gpu):
        return Collectives()

    def in_flight_tokens(self, profile, gpu):
        return 4096

    def state_slots(self, profile):
        return StateSlots()

    def logged_kv_tokens(self, profile, pool):
        return pool.capacity_tokens


class ToyMetrics(NoPhaseTimes):
    def acceptance(self, before: Samples, after: Samples) -> Acceptance | None:
        if "toy_drafted_total" not in after:
            return None
        drafted = delta(before, after, "toy_drafted_total")
        accepted = delta(before, after, "toy_accepted_total")
        return Acceptance("toy", accepted / drafted, None) if drafted > 0 else None


@rule("engine.toy-tokens", source="docs/adding-an-engine.md")
def toy_tokens(ctx: CompatContext) -> Finding | None:
    """The toy engine drafts at most 4 tokens."""
    k = ctx.profile.proposer.num_speculative_tokens
    if k <= 4:
        return None
    return Finding.error(
        what=f"proposer.num_speculative_tokens={k} but toy drafts at most 4",
        why="toy refuses it",
        fix="set proposer.num_speculative_tokens: 4",
    )


class ToyEngine:
    name: ClassVar[str] = "toy"
    managed_flags: ClassVar[dict[str, str]] = {
        "--port": "serving.port", "--memory": "serving.gpu_memory_fraction", "--draft": "proposer"
    }
    kv_cache_dtypes: ClassVar[dict[str, str]] = {"auto": "auto"}
    multi_node_gap: ClassVar[str | None] = "toy runs on one node"
    shm_size: ClassVar[str] = "1Gi"
    serves_eagle1_heads: ClassVar[bool] = False
    runs_eagle3_head_as_eagle1: ClassVar[bool] = False
    runs_eagle3_head_as_eagle1: ClassVar[bool] = False
    memory: ClassVar[ToyMemory] = ToyMemory()
    metrics: ClassVar[ToyMetrics] = ToyMetrics()

    def launch(self, spec: LaunchSpec) -> EngineLaunch:
        argv = ["toy-serve", spec.target_model, "--port", str(spec.profile.serving.port)]
        argv += ["--memory", str(spec.memory_fraction)]
        if spec.speculative:
            argv += ["--draft", spec.draft_model or "ngram"]
        return EngineLaunch(
            engine="toy", version=spec.release.version, image=spec.release.image,
            argv=tuple(argv), port=spec.profile.serving.port, health_path="/health",
            ready_path="/health", metrics_path="/metrics",
        )

    def multi_node(self, argv: Sequence[str], *, nodes, rank, leader_address):
        raise NotImplementedError(self.multi_node_gap)

    def speculative_flags(self) -> frozenset[str]:
        return frozenset({"--draft"})

    def draft_tensor_parallel_choices(self, method, target_tp):
        return None

    def speculates_with_pipeline_parallel(self, release, method) -> bool:
        return False

    def reads_speculators_heads(self, release):
        return None

    def attention_data_parallel_sizes(self, tensor_parallel_size):
        return (1,)

    def fp8_kv_cache_on(self, release, gpu, dtype, *, mla):
        return None

    def draft_vocab_must_match(self, release):
        return False

    def reads_batch_size_schedule(self, release):
        return ScheduleSupport(False, "toy drafts one length at every load", "docs/adding-an-engine.md")

    def rules(self) -> tuple[Rule, ...]:
        return (toy_tokens,)
'''

TOY_CAPABILITIES = """
toy:
  image: "example.com/toy:{version}"
  oldest_reason: "toy starts at 1.0"
  releases:
    - version: "1.0"
      adds_methods: [draft_model, ngram]
      source: "docs/adding-an-engine.md"
      verified: false
"""


def add_toy_engine(root: Path) -> None:
    """The edits docs/adding-an-engine.md lists, all under orchestrator/engines/."""
    engines = root / "orchestrator" / "engines"
    (engines / "toy.py").write_text(TOY_MODULE)
    names = engines / "names.py"
    names.write_text(
        names.read_text()
        .replace(
            'Literal["vllm", "sglang", "trtllm"]', 'Literal["vllm", "sglang", "trtllm", "toy"]'
        )
        .replace('("vllm", "sglang", "trtllm")', '("vllm", "sglang", "trtllm", "toy")')
    )
    registry = engines / "__init__.py"
    registry.write_text(
        registry.read_text().replace(
            '    "trtllm": ("orchestrator.engines.trtllm", "TrtllmEngine"),\n',
            '    "trtllm": ("orchestrator.engines.trtllm", "TrtllmEngine"),\n'
            '    "toy": ("orchestrator.engines.toy", "ToyEngine"),\n',
        )
    )
    capabilities = engines / "capabilities.yaml"
    capabilities.write_text(capabilities.read_text() + TOY_CAPABILITIES)


def snapshot(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): p.read_text()
        for p in sorted((root / "orchestrator").rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def specdeploy(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        cwd=root,
        env={"PYTHONPATH": str(root), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_toy_engine_needs_edits_under_engines_only(tmp_path: Path) -> None:
    root = tmp_path / "copy"
    shutil.copytree(REPO_ROOT / "orchestrator", root / "orchestrator", ignore=_pycache)
    shutil.copytree(REPO_ROOT / "templates", root / "templates")
    before = snapshot(root)
    add_toy_engine(root)
    after = snapshot(root)
    changed = {p for p in after if before.get(p) != after[p]}
    assert changed and all(p.startswith("orchestrator/engines/") for p in changed), changed

    profile = root / "toy.yaml"
    data = profile_dict(
        engine={"name": "toy", "version": "1.0"},
        proposer={"method": "ngram", "num_speculative_tokens": 3},
        deploy={"baseline": True},
    )
    profile.write_text(yaml.safe_dump(data))
    validated = specdeploy(root, "validate", str(profile), "--offline", "--format", "json")
    assert validated.returncode == 0, validated.stdout + validated.stderr
    document = json.loads(validated.stdout)
    assert document["engine"]["image"] == "example.com/toy:1.0"
    assert document["memory"]["engine_knob"] == "memory"

    out = root / "out"
    rendered = specdeploy(root, "render", str(profile), "--out", str(out), "--offline")
    assert rendered.returncode == 0, rendered.stdout + rendered.stderr
    launch = json.loads((out / "launch.json").read_text())
    assert launch["argv"][:2] == ["toy-serve", "Qwen/Qwen3-8B"]
    assert launch["argv"][-2:] == ["--draft", "ngram"]
    baseline = json.loads((out / "baseline" / "launch.json").read_text())
    assert "--draft" not in baseline["argv"]
    deployment = yaml.safe_load((out / "k8s" / "deployment-test.yaml").read_text())
    volumes = deployment["spec"]["template"]["spec"]["volumes"]
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}} in volumes

    # Its own rule runs for its profiles, and explain finds it.
    data["proposer"]["num_speculative_tokens"] = 6
    profile.write_text(yaml.safe_dump(data))
    refused = specdeploy(root, "validate", str(profile), "--offline")
    assert refused.returncode == 4 and "engine.toy-tokens" in refused.stderr
    explained = specdeploy(root, "explain", "engine.toy-tokens")
    assert explained.returncode == 0 and "at most 4 tokens" in explained.stdout


def _pycache(directory: str, names: list[str]) -> list[str]:
    return [n for n in names if n == "__pycache__"]
