"""A CPU test bed where speculation truly pays: a deep target whose later layers do nothing.

With random tiny models, speculation never pays on a CPU (the draft costs as much as it saves).
Here it does, by construction (`make_layered_models`, built by `build_tiny.py`):

* `target`: 24 Llama layers of width 512. Layers 1..23 have zero output projections (attention
  `o_proj` and MLP `down_proj`), so they write nothing into the residual stream: the greedy output
  equals the first layer's, while every layer is still computed.
* `draft`: exactly that first layer (same embeddings, layer 0, norm and head). Under greedy
  decoding every drafted token is accepted, at 1/24 of the target's layer compute.
* `noisy-draft`: the same with Gaussian noise (0.375 of the head's standard deviation, fixed
  seed) mixed into its head, which lowers acceptance in a controlled way, more at deep positions.

Measured with vLLM 0.32.0 on a shared 2-core CPU (k=8, `specdeploy bench`, 24 requests of 24
tokens per level, chat workload; benchmarks/layered_testbed.py reruns it): the noisy draft accepts
4.4 of 9. Its time per output token is 1.44x lower than the target's alone at concurrency 1 and
1.3x higher at 12 (ratio 0.77; output throughput 1.34x and 0.73x): the crossover lies inside what
a test can drive, with a margin on each side far wider than the operator's hysteresis. Noise 0.35
and 0.4 measured 1.50x/0.82 and 1.32x/0.74; at noise 0.2 and k=4 the draft still tied at 12-16
concurrent requests, no crossover a test could rely on.

The crossover is the CPU's, not the models': on a 2-core Xeon with AMX (bf16 matrix units, vLLM
runs the float32 checkpoints in bf16) the noisy draft measured 4x faster per output token at
concurrency 1 and still 1.6-2x at 12, in bf16 and in float32, and with a 16-token scheduler budget:
a verify pass over 12 x 9 tokens there costs little more than one over 12. The operator scenario
measures this first and skips where there is no crossover to follow.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from orchestrator.dev.tiny_models import _run_builder, find_model_python

LAYERED_DIR: Final = "layered"
"""Subdirectory of the tiny-models directory (its own stamp: the other models stay as built)."""
GENERATOR_VERSION: Final = 2
TARGET_LAYERS: Final = 24
HEAD_NOISE: Final = 0.375
"""Noise std of the noisy draft's head, relative to the head's own std."""
DRAFT_LENGTH: Final = 8
"""num_speculative_tokens the test bed is measured and driven at (the benchmark, the operator
scenario): deep drafts cost the verifier most at high load, which puts the crossover in range."""
_SHAPE: Final = {
    "hidden_size": 512,
    "intermediate_size": 1024,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 64,
    "max_position_embeddings": 4096,
    "seed": 11,
    "vocab_prefix": "w",
    "vocab_words": 994,
    "vocab_size": 1024,
}
_STAMP: Final = "layered.json"


@dataclass(frozen=True)
class LayeredModels:
    """Absolute paths of the layered test bed's checkpoints."""

    root: Path
    target: Path
    draft: Path
    """The target's first layer, exactly: acceptance 1.0."""
    noisy_draft: Path
    """The same with noise in its head: acceptance about 4.4 of 9 at k=8."""


def make_layered_models(
    out_dir: Path, *, python: str | None = None, force: bool = False
) -> LayeredModels:
    """Build (or reuse, when built by this generator version) the layered pair in
    `out_dir/layered`."""
    root = (out_dir / LAYERED_DIR).resolve()
    models = LayeredModels(root, root / "target", root / "draft", root / "noisy-draft")
    plan = _plan(models)
    stamp = root / _STAMP
    if not force and stamp.is_file() and json.loads(stamp.read_text()) == plan:
        return models
    _run_builder(python or find_model_python(), plan)
    stamp.write_text(json.dumps(plan, indent=2, sort_keys=True) + "\n")
    return models


def _plan(models: LayeredModels) -> dict[str, object]:
    def model(path: Path, role: str, noise: float) -> dict[str, object]:
        layered = {
            "role": role,
            "target_layers": TARGET_LAYERS,
            "head_noise": noise,
            "noise_seed": 5,
        }
        return {**_SHAPE, "name": path.name, "path": str(path), "layered": layered}

    return {
        "generator_version": GENERATOR_VERSION,
        "models": [
            model(models.target, "target", 0.0),
            model(models.draft, "draft", 0.0),
            model(models.noisy_draft, "draft", HEAD_NOISE),
        ],
    }
