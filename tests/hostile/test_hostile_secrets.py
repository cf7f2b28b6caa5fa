"""Credentials where they do not belong (issue 16 §9): a token in serving.extra_args or a password
in engine.image is an error that never repeats the value, and an engine that prints the
environment's HF_TOKEN in its dying words has it redacted from what specdeploy shows."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.hostile.capped_cli import specdeploy
from tests.support import REPO_ROOT, write_profile

TOKEN = "hf_" + "Hostile0" * 4 + "zz"  # the shape of a Hugging Face user token
NGRAM = {"method": "ngram", "num_speculative_tokens": 3}


@pytest.mark.parametrize(
    ("sections", "where"),
    [
        ({"serving": {"extra_args": ["--hf-token", TOKEN]}}, "serving.extra_args[0]"),
        ({"serving": {"extra_args": ["--api-key=team-secret-0042"]}}, "serving.extra_args[0]"),
        (
            {"engine": {"name": "vllm", "version": "0.32.0",
                        "image": "robot:team-secret-0042@registry.example.com/vllm:v0.32.0"}},
            "engine.image",
        ),
    ],
)  # fmt: skip
def test_a_credential_in_the_profile_is_exit_4_and_never_echoed(
    tmp_path: Path, sections: dict, where: str
) -> None:
    profile = write_profile(tmp_path, proposer=NGRAM, **sections)
    out = tmp_path / "out"
    run = specdeploy("render", str(profile), "--out", str(out), "--offline")
    assert run.returncode == 4, run.output
    assert "serving.secret-in-args" in run.output and where in run.output
    assert TOKEN not in run.output and "team-secret-0042" not in run.output
    assert not out.exists()


FAKE_ENGINE = """#!{python}
import os, sys
print("INFO args:", " ".join(sys.argv[1:]), flush=True)
print("INFO environment HF_TOKEN=" + os.environ["HF_TOKEN"], flush=True)
print("OSError: 401 Client Error: bad token " + os.environ["HF_TOKEN"], flush=True)
sys.exit(1)
"""


def test_an_engine_echoing_the_token_has_it_redacted(tmp_path: Path) -> None:
    import sys

    shutil.copytree(REPO_ROOT / "tests" / "fixtures" / "checkpoints" / "qwen3-0.6b", tmp_path / "m")
    profile = write_profile(
        tmp_path,
        target={"model": "./m"},
        proposer=NGRAM,
        hardware={"device": "cpu", "gpu": None},
        serving={"max_model_len": 512, "max_concurrency": 2, "gpu_memory_fraction": 0.1},
    )
    engine = tmp_path / "fake-vllm"
    engine.write_text(FAKE_ENGINE.format(python=sys.executable))
    engine.chmod(0o755)
    run = specdeploy(
        "run", str(profile), "--local", "--engine-bin", str(engine), "--port", "1", "--offline",
        env={"HF_TOKEN": TOKEN},
    )  # fmt: skip
    assert run.returncode == 6, run.output
    assert "vllm said: OSError: 401 Client Error: bad token [redacted]" in run.stderr
    assert "HF_TOKEN=[redacted]" in run.stderr
    assert TOKEN not in run.output
