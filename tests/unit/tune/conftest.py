"""What the tune tests share."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.support import REPO_ROOT


@pytest.fixture
def profile(tmp_path: Path) -> Path:
    """The qwen3 draft example, with room for the loads the tests sweep (16 in the server)."""
    document = yaml.safe_load((REPO_ROOT / "profiles" / "vllm-qwen3-4b-draft.yaml").read_text())
    document["serving"].update(max_model_len=4096, max_concurrency=16)
    path = tmp_path / "draft.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path
