"""Tiny local checkpoints for trying specdeploy on a laptop and for end-to-end tests.

`make_tiny_models(out_dir)` builds three random-weight Llama checkpoints (about 1 MB each, in
seconds, byte-identical on every run) that a real vLLM serves on a CPU:

* `target`    2 layers, hidden 64, 4 heads / 2 KV heads of head_dim 32, a 1024-token word tokenizer
* `draft`     the same shape with 1 layer and the *same* tokenizer: a valid draft_model pairing
* `bad-draft` 1 layer with a *different* tokenizer and vocab_size 1200: an invalid pairing

The builder needs torch, transformers and tokenizers. When this interpreter lacks them it runs
`build_tiny.py` with the referee venv's Python (`.venv-vllm/`, see `.ci/install-referees.sh`).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from orchestrator.errors import OrchestratorError

DEFAULT_DIR: Final = Path(".cache") / "tiny-models"
"""Where `specdeploy dev make-tiny-models` writes by default, relative to the repository root;
the profiles/local/tiny-*.yaml profiles point here (`../../.cache/tiny-models/...`)."""

GENERATOR_VERSION: Final = 1
"""Bump when the checkpoints change, so cached copies are rebuilt."""

_SHAPE: Final = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    # vLLM's CPU attention backend refuses head_dim 16 (64/4); 32 is the smallest it accepts.
    "head_dim": 32,
    "max_position_embeddings": 4096,
}
# 4 special tokens + 26 letters + 994 words = 1024 token ids (target and draft);
# the bad draft has other words ("x0".."x1169") and 1200 ids, so both its content and size differ.
_MODELS: Final[tuple[dict[str, str | int], ...]] = (
    {"name": "target", "num_hidden_layers": 2, "seed": 1, "vocab_prefix": "w", "vocab_words": 994},
    {"name": "draft", "num_hidden_layers": 1, "seed": 2, "vocab_prefix": "w", "vocab_words": 994},
    {
        "name": "bad-draft",
        "num_hidden_layers": 1,
        "seed": 3,
        "vocab_prefix": "x",
        "vocab_words": 1170,
    },
)
_STAMP: Final = "tiny-models.json"


@dataclass(frozen=True)
class TinyModels:
    """Absolute paths of the three checkpoint directories."""

    root: Path
    target: Path
    draft: Path
    """Same tokenizer as the target, one layer: a valid draft_model pairing."""
    bad_draft: Path
    """Different tokenizer and vocab_size: a pairing specdeploy must refuse."""


def make_tiny_models(
    out_dir: Path, *, python: str | None = None, force: bool = False
) -> TinyModels:
    """Build (or reuse, when already built by this generator version) the tiny checkpoints."""
    root = out_dir.resolve()
    models = TinyModels(root, root / "target", root / "draft", root / "bad-draft")
    plan = _plan(root)
    stamp = root / _STAMP
    if not force and stamp.is_file() and json.loads(stamp.read_text()) == plan:
        return models
    interpreter = python or find_model_python()
    _run_builder(interpreter, plan)
    stamp.write_text(json.dumps(plan, indent=2, sort_keys=True) + "\n")
    return models


def find_model_python(start: Path | None = None) -> str:
    """A Python with torch and transformers: `.venv-vllm/bin/python` in the current directory or
    one of its parents (preferred: the checkpoints are then written by the transformers release
    the referee vLLM serves them with), else this interpreter if it has them."""
    here = (start or Path.cwd()).resolve()
    for directory in (here, *here.parents):
        candidate = directory / ".venv-vllm" / "bin" / "python"
        if candidate.exists():
            return str(candidate)
    if all(importlib.util.find_spec(name) for name in ("torch", "transformers", "tokenizers")):
        return sys.executable
    raise OrchestratorError(
        "cannot build tiny models: no Python with torch and transformers was found",
        why="the checkpoints are built and saved with transformers (random weights, local tokenizer)",
        fix="run .ci/install-referees.sh vllm from the repository root (it creates .venv-vllm/), "
        "or pass --python PATH to an interpreter that has torch and transformers",
    )


def _plan(root: Path) -> dict[str, object]:
    models = []
    for model in _MODELS:
        words = model["vocab_words"]
        assert isinstance(words, int)
        models.append(
            {**_SHAPE, **model, "path": str(root / str(model["name"])), "vocab_size": words + 30}
        )
    return {"generator_version": GENERATOR_VERSION, "models": models}


def _run_builder(python: str, plan: dict[str, object]) -> None:
    script = Path(__file__).with_name("build_tiny.py")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}
    result = subprocess.run(
        [python, str(script), json.dumps(plan)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if result.returncode != 0:
        tail = "\n".join(result.stderr.strip().splitlines()[-15:])
        raise OrchestratorError(
            f"building the tiny models with {python} failed (exit {result.returncode})",
            why=f"the builder reported:\n{tail}",
            fix="check that this Python has torch, transformers and tokenizers "
            "(.ci/install-referees.sh vllm installs them into .venv-vllm/)",
        )
