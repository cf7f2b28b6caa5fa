"""End-to-end fixtures: the tiny checkpoints, built once per session (with the vLLM venv).

Test modules here mark themselves `e2e`. The bench tests use `tiny_models` and
`tests.e2e.servers.vllm_server` too, so keep those names.
"""

from __future__ import annotations

import pytest

from orchestrator.dev.tiny_models import DEFAULT_DIR, TinyModels, make_tiny_models
from tests.e2e.servers import VLLM_PYTHON, require_vllm
from tests.support import REPO_ROOT


@pytest.fixture(scope="session")
def tiny_models() -> TinyModels:
    """`.target`, `.draft` (same tokenizer) and `.bad_draft` (other tokenizer) checkpoint
    directories, in the repository's .cache/tiny-models/ (where profiles/tiny-*.yaml point)."""
    require_vllm()
    return make_tiny_models(REPO_ROOT / DEFAULT_DIR, python=str(VLLM_PYTHON))
