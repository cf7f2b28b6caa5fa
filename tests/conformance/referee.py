"""Pytest side of the referees: a long-lived engine subprocess that judges rendered argv, and
local stand-ins for hub models.

The referee scripts (`vllm_referee.py`, `sglang_referee.py`) run with the engine venv's Python,
so the engines' heavy imports happen once per session. Hub model ids are swapped for stand-in
directories holding the config.json specdeploy itself assumed for that model (its built-in catalog
copy, or the resolved local/cache config), so model-shape checks such as "attention heads must
be divisible by the tensor parallel size" still test the real numbers. No weights are needed:
argument parsing and engine-config creation read only config.json.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from orchestrator.checkpoint.catalog import catalog_entry
from orchestrator.checkpoint.info import CheckpointInfo
from tests.support import REPO_ROOT

HERE = Path(__file__).resolve().parent
VLLM_PYTHON = REPO_ROOT / ".venv-vllm" / "bin" / "python"
SGLANG_PYTHON = REPO_ROOT / ".venv-sglang" / "bin" / "python"
INSTALL_HINT = "run .ci/install-referees.sh from the repository root"


def referee_env(scratch: Path) -> dict[str, str]:
    """Offline, and every cache the engines write kept inside `scratch` (vLLM writes
    ~/.cache/vllm/modelinfos and /tmp/torchinductor_* even without serving)."""
    scratch.mkdir(parents=True, exist_ok=True)
    return {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "VLLM_CACHE_ROOT": str(scratch / "vllm-cache"),
        "TMPDIR": str(scratch),
        "HF_HOME": str(scratch / "hf-home"),
        "PYTHONWARNINGS": "ignore",
    }


class Referee:
    """One engine subprocess answering `ask(request)` with the engine's own verdict."""

    def __init__(self, python: Path, script: str, scratch: Path) -> None:
        self.log_path = scratch / f"{Path(script).stem}.log"
        self._log: IO[str] = self.log_path.open("w")
        self._proc = subprocess.Popen(
            [str(python), str(HERE / script)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            env=referee_env(scratch),
        )

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(json.dumps(request) + "\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline()
        if not line:
            tail = self.log_path.read_text()[-3000:]
            raise RuntimeError(f"the referee process died; the end of its log:\n{tail}")
        result: dict[str, Any] = json.loads(line)
        return result

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._log.close()


@dataclass
class StandIns:
    """Local directories standing in for hub models, one per model id."""

    root: Path
    tokenizer_from: Path
    """A tiny checkpoint whose tokenizer files are copied beside each stand-in config."""
    made: dict[str, Path] = field(default_factory=dict)

    def path_for(self, ref: str, info: CheckpointInfo | None, *, remote_code: bool = False) -> Path:
        """A directory with `ref`'s assumed config.json. With `remote_code` (the profile sets
        trust_remote_code) it also holds a config class, as a checkpoint with custom code does."""
        key = f"{ref}#remote" if remote_code else ref
        if key in self.made:
            return self.made[key]
        config = assumed_config(ref, info)
        directory = self.root / re.sub(r"[^A-Za-z0-9._-]+", "--", key)
        directory.mkdir(parents=True, exist_ok=True)
        if remote_code:
            config = {**config, "auto_map": {"AutoConfig": "configuration_standin.StandInConfig"}}
            (directory / "configuration_standin.py").write_text(
                _REMOTE_CONFIG.format(model_type=config.get("model_type", "standin"))
            )
        (directory / "config.json").write_text(json.dumps(config, indent=2))
        for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
            if (self.tokenizer_from / name).exists():
                shutil.copy(self.tokenizer_from / name, directory / name)
        self.made[key] = directory
        return directory


# A generic config class: PretrainedConfig keeps every config.json key as an attribute, which is
# all that argument parsing and engine-config creation read.
_REMOTE_CONFIG = """from transformers import PretrainedConfig


class StandInConfig(PretrainedConfig):
    model_type = "{model_type}"
"""


def assumed_config(ref: str, info: CheckpointInfo | None) -> dict[str, Any]:
    """The config.json specdeploy assumed for `ref`: the file it read, or its catalog copy."""
    if info is not None and info.source in ("local", "hf-cache"):
        loaded: dict[str, Any] = json.loads((Path(info.location) / "config.json").read_text())
        return loaded
    entry = catalog_entry(ref)
    if entry is not None:
        return dict(entry.config)
    raise LookupError(f"{ref}: neither a local checkpoint nor in specdeploy's catalog")


def swap_vllm_models(argv: list[str], models: dict[str, str]) -> list[str]:
    """`vllm serve MODEL ... --speculative-config {"model": DRAFT}` with models replaced;
    returns the tokens after `vllm serve`, as vLLM's serve parser receives them."""
    assert argv[:2] == ["vllm", "serve"], f"not a vllm serve command: {argv[:3]}"
    out = list(argv[2:])
    out[0] = models.get(out[0], out[0])
    for index, token in enumerate(out[:-1]):
        if token in ("--speculative-config", "-sc"):
            spec = json.loads(out[index + 1])
            if "model" in spec:
                spec["model"] = models.get(spec["model"], spec["model"])
            out[index + 1] = json.dumps(spec)
    return out


SGLANG_MODEL_FLAGS = ("--model-path", "--speculative-draft-model-path")


def swap_sglang_models(argv: list[str], models: dict[str, str]) -> list[str]:
    """`python3 -m sglang.launch_server --model-path M ...` with models replaced; returns the
    tokens after the module name, as `prepare_server_args` receives them."""
    assert argv[1:3] == ["-m", "sglang.launch_server"], f"not an SGLang launch: {argv[:3]}"
    out = list(argv[3:])
    for index, token in enumerate(out[:-1]):
        if token in SGLANG_MODEL_FLAGS:
            out[index + 1] = models.get(out[index + 1], out[index + 1])
    return out


def flag_value(argv: list[str], flag: str) -> str:
    """The token after `flag` in argv."""
    return argv[argv.index(flag) + 1]
