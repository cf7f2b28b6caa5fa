"""Hostile checkpoint metadata (issue 16 §3): config.json, the weight index, safetensors headers
and tokenizer files with values of the wrong type, not finite, negative or oversized, and files
that are not regular files. inspect, validate, render and plan each report the checkpoint as
unreadable, naming the file and key (exit 4), never a crash; render writes nothing."""

from __future__ import annotations

import json
import os
import shutil
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.hostile.capped_cli import specdeploy
from tests.support import REPO_ROOT, write_profile

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "checkpoints"


def _edit_json(name: str, change: Callable[[dict], None]) -> Callable[[Path], None]:
    def apply(directory: Path) -> None:
        data = json.loads((directory / name).read_text())
        change(data)
        (directory / name).write_text(json.dumps(data))  # Infinity/NaN as Python writes them

    return apply


def _header(entries: object) -> Callable[[Path], None]:
    def apply(directory: Path) -> None:
        raw = json.dumps(entries).encode()
        (directory / "model-00001.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw)

    return apply


def _fifo(name: str) -> Callable[[Path], None]:
    def apply(directory: Path) -> None:
        (directory / name).unlink()
        os.mkfifo(directory / name)

    return apply


def _oversize(name: str) -> Callable[[Path], None]:
    def apply(directory: Path) -> None:
        with (directory / name).open("a") as handle:
            handle.truncate(65 << 20)  # sparse: 65 MiB without writing them

    return apply


# case: (mutation of the target checkpoint, file named, text the report must hold)
CASES: dict[str, tuple[Callable[[Path], None], str, str]] = {
    "hidden-size-infinity": (
        _edit_json("config.json", lambda c: c.update(hidden_size=float("inf"))),
        "config.json", "`hidden_size` is Infinity, not a whole number",
    ),
    "architectures-int": (
        _edit_json("config.json", lambda c: c.update(architectures=5)),
        "config.json", "`architectures` is 5, not a list of strings",
    ),
    "negative-heads": (
        _edit_json("config.json", lambda c: c.update(num_key_value_heads=-8)),
        "config.json", "`num_key_value_heads` is -8, outside 0..2^53",
    ),
    "rope-factor-nan": (
        _edit_json("config.json", lambda c: c.update(rope_scaling={"rope_type": "yarn", "factor": float("nan")})),
        "config.json", "`rope_scaling.factor` is NaN",
    ),
    "total-size-infinity": (
        _edit_json("model.safetensors.index.json", lambda i: i["metadata"].update(total_size=float("inf"))),
        "model.safetensors.index.json", "`metadata.total_size` is Infinity",
    ),
    "total-size-negative": (
        _edit_json("model.safetensors.index.json", lambda i: i["metadata"].update(total_size=-1)),
        "model.safetensors.index.json", "`metadata.total_size` is -1",
    ),
    "weight-map-list": (
        _edit_json("model.safetensors.index.json", lambda i: i.update(weight_map=[])),
        "model.safetensors.index.json", "`weight_map` is a list, not an object",
    ),
    "string-offsets": (
        _header({"w": {"dtype": "BF16", "shape": [2], "data_offsets": ["0", "4"]}}),
        "model-00001.safetensors", "`w.data_offsets[0]` is '0', not a whole number",
    ),
    "scalar-shape": (
        _header({"w": {"dtype": "BF16", "shape": 7, "data_offsets": [0, 14]}}),
        "model-00001.safetensors", "`w.shape` is 7, not a list",
    ),
    "added-token-id-infinity": (
        _edit_json("tokenizer.json", lambda t: t.update(added_tokens=[{"id": float("inf"), "content": "<x>"}])),
        "tokenizer.json", "`added_tokens[0].id` is Infinity",
    ),
    "config-not-json": (
        lambda d: (d / "config.json").write_text("{" * 100_000),
        "config.json", "is not",
    ),
    "config-fifo": (_fifo("config.json"), "config.json", "is a named pipe (FIFO)"),
    "tokenizer-oversize": (_oversize("tokenizer.json"), "tokenizer.json", "is larger than 64 MiB"),
}  # fmt: skip


def _profile(tmp_path: Path, case: str) -> tuple[Path, Path]:
    target = tmp_path / "target"
    shutil.copytree(FIXTURES / "qwen3-8b", target)
    shutil.copytree(FIXTURES / "qwen3-0.6b", tmp_path / "draft")
    CASES[case][0](target)
    profile = write_profile(
        tmp_path,
        target={"model": "./target"},
        proposer={"method": "draft_model", "model": "./draft", "num_speculative_tokens": 4},
    )
    return profile, target


@pytest.mark.parametrize("case", sorted(CASES))
def test_validate_reports_the_unreadable_file_and_key(tmp_path: Path, case: str) -> None:
    profile, target = _profile(tmp_path, case)
    _, file, problem = CASES[case]
    run = specdeploy("validate", str(profile), "--offline", "--format", "json")
    assert run.returncode == 4, run.output
    (finding,) = [f for f in json.loads(run.stdout)["findings"] if f["severity"] == "error"]
    assert finding["rule"] == "checkpoint.unresolved" and finding["field"] == "target.model"
    assert f"{target / file}" in finding["what"] and problem in finding["what"]
    assert "repair or replace" in finding["fix"]


@pytest.mark.parametrize("case", ["hidden-size-infinity", "string-offsets", "total-size-infinity"])
def test_render_plan_and_inspect_report_it_too(tmp_path: Path, case: str) -> None:
    profile, target = _profile(tmp_path, case)
    problem = CASES[case][2]
    out = tmp_path / "out"
    render = specdeploy("render", str(profile), "--out", str(out), "--offline")
    plan = specdeploy("plan", str(profile), "--offline")
    inspect = specdeploy("inspect", str(target), "--offline")
    for run in (render, plan, inspect):
        assert run.returncode == 4, run.output
        assert problem in run.output
    assert not out.exists()
