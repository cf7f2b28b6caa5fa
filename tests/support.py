"""Test helpers shared across test packages (importable as `tests.support`)."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import NamedTuple

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
PROFILES_DIR = REPO_ROOT / "profiles"
EXAMPLE_PROFILES = sorted(PROFILES_DIR.glob("*.yaml"))
#: Profiles for tiny local checkpoints (device cpu); they validate once
#: `specdeploy dev make-tiny-models` has built the models they point at.
LOCAL_PROFILES_DIR = PROFILES_DIR / "local"
LOCAL_PROFILES = sorted(LOCAL_PROFILES_DIR.glob("*.yaml"))


class Golden(NamedTuple):
    root: Path
    update: bool

    def check(self, relpath: str, actual: str) -> None:
        path = self.root / relpath
        if self.update:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(actual, encoding="utf-8")
            return
        expected = path.read_text(encoding="utf-8") if path.exists() else ""
        if actual != expected:
            diff = "".join(
                difflib.unified_diff(
                    expected.splitlines(True), actual.splitlines(True), str(path), "rendered"
                )
            )
            pytest.fail(
                f"{relpath} differs from its golden file; if intended, run "
                f"`pytest tests/golden --update-golden` and review:\n{diff}"
            )


BASE_PROFILE: dict[str, object] = {
    "apiVersion": "specdeploy/v1",
    "kind": "SpeculativeDeployment",
    "metadata": {"name": "test"},
    "engine": {"name": "vllm", "version": "0.32.0"},
    "target": {"model": "Qwen/Qwen3-8B"},
    "proposer": {"method": "draft_model", "model": "Qwen/Qwen3-0.6B", "num_speculative_tokens": 4},
}


def profile_dict(**sections: object) -> dict[str, object]:
    """BASE_PROFILE with top-level sections replaced (None removes a section)."""
    data = dict(BASE_PROFILE)
    for key, value in sections.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    return data


def make_profile(**sections: object):  # type: ignore[no-untyped-def]
    """A validated Profile built from BASE_PROFILE with the given sections replaced."""
    import yaml

    from orchestrator.profile.loading import parse_profile

    return parse_profile(yaml.safe_dump(profile_dict(**sections)), "test.yaml")


def write_profile(directory: Path, name: str = "p.yaml", **sections: object) -> Path:
    import yaml

    path = directory / name
    path.write_text(yaml.safe_dump(profile_dict(**sections), sort_keys=False), encoding="utf-8")
    return path
