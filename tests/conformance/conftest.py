"""Referee fixtures: the vLLM and SGLang subprocesses, stand-in models, rendered launches.

Test modules here mark themselves `referee`; fixtures skip with the install command when a venv is missing.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from orchestrator.dev.tiny_models import DEFAULT_DIR, TinyModels, make_tiny_models
from tests.conformance.referee import (
    INSTALL_HINT,
    SGLANG_PYTHON,
    VLLM_PYTHON,
    Referee,
    StandIns,
)
from tests.support import REPO_ROOT


@pytest.fixture(scope="session")
def repo_tiny_models() -> TinyModels:
    """The tiny checkpoints the tiny-*.yaml example profiles point at (built once, cached)."""
    if not VLLM_PYTHON.exists():
        pytest.skip(f"vLLM referee venv {VLLM_PYTHON.parent.parent} is missing; {INSTALL_HINT}")
    return make_tiny_models(REPO_ROOT / DEFAULT_DIR, python=str(VLLM_PYTHON))


@pytest.fixture(scope="session")
def stand_ins(tmp_path_factory: pytest.TempPathFactory, repo_tiny_models: TinyModels) -> StandIns:
    return StandIns(tmp_path_factory.mktemp("stand-ins"), repo_tiny_models.target)


@pytest.fixture(scope="session")
def vllm_referee(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Referee]:
    if not VLLM_PYTHON.exists():
        pytest.skip(f"vLLM referee venv {VLLM_PYTHON.parent.parent} is missing; {INSTALL_HINT}")
    referee = Referee(VLLM_PYTHON, "vllm_referee.py", tmp_path_factory.mktemp("vllm-referee"))
    yield referee
    referee.close()


@pytest.fixture(scope="session")
def sglang_referee(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Referee]:
    if not SGLANG_PYTHON.exists():
        pytest.skip(f"SGLang referee venv {SGLANG_PYTHON.parent.parent} is missing; {INSTALL_HINT}")
    referee = Referee(SGLANG_PYTHON, "sglang_referee.py", tmp_path_factory.mktemp("sglang-ref"))
    yield referee
    referee.close()
