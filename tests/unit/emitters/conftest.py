"""Fixtures for the platform emitters' referee tests."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import REPO_ROOT

HERE = Path(__file__).parent
PLATFORM_FIXTURES = REPO_ROOT / "tests" / "fixtures" / "platforms"
VLLM_PYTHON = REPO_ROOT / ".venv-vllm" / "bin" / "python"
CI_BIN = REPO_ROOT / ".ci" / "bin"

ParseVllm = Callable[[list[list[str]]], list[dict[str, object]]]


@pytest.fixture(scope="session")
def parse_vllm() -> ParseVllm:
    """vLLM 0.32.0's own argument parser over argvs (tokens after `vllm serve`), in one process."""
    return vllm_parser()


@pytest.fixture(scope="session")
def parse_vllm_engine_args() -> ParseVllm:
    """vLLM 0.32.0's engine-only parser (`AsyncEngineArgs.add_cli_args`) over argvs, in one
    process: the parser Dynamo's vLLM worker hands the tokens it does not take."""
    return vllm_parser("--engine-args")


def vllm_parser(*options: str) -> ParseVllm:
    if not VLLM_PYTHON.exists():
        pytest.skip(
            f"vLLM referee venv {VLLM_PYTHON.parent.parent} is missing (.ci/install-referees.sh)"
        )

    def parse(argvs: list[list[str]]) -> list[dict[str, object]]:
        done = subprocess.run(
            [str(VLLM_PYTHON), str(HERE / "vllm_parse.py"), *options],
            input=json.dumps(argvs),
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
        return list(json.loads(done.stdout))

    return parse


def tool(name: str) -> str:
    """A real CLI referee (.ci/bin first, then PATH), or skip."""
    for candidate in (CI_BIN / name, shutil.which(name)):
        if candidate and Path(candidate).exists():
            return str(candidate)
    pytest.skip(f"{name} is not installed (.ci/install-k8s-tools.sh)")


def at_release(profile: Path, directory: Path, version: str) -> Path:
    """A copy of an example profile planned for another engine release (the one a platform
    runs, e.g. Kaito's preset image's vLLM)."""
    import yaml

    document = yaml.safe_load(profile.read_text(encoding="utf-8"))
    document["engine"]["version"] = version
    path = directory / profile.name
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return path
