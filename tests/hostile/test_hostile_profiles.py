"""Hostile profiles (issue 16 §1, §2): YAML built to exhaust memory or recursion, tags and keys a
profile never uses, numbers that overflow the memory arithmetic, names that break file names.
Each ends in exit 3 with the position and field, within seconds, under the memory cap."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from tests.hostile.capped_cli import specdeploy

BASE = textwrap.dedent(
    """\
    apiVersion: specdeploy/v1
    kind: SpeculativeDeployment
    metadata: {name: hostile}
    engine: {name: vllm, version: "0.32.0"}
    target: {model: Qwen/Qwen3-8B}
    proposer: {method: draft_model, model: Qwen/Qwen3-0.6B, num_speculative_tokens: 4}
    """
)


def _billion_laughs() -> str:
    """Nine levels of nine aliases each: 9^9 (387 million) strings from about 800 bytes."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(8):
        name, previous = chr(98 + level), chr(97 + level)
        lines.append(f"{name}: &{name} [{', '.join(['*' + previous] * 9)}]")
    return "\n".join(lines) + "\n"


YAML_CASES = {
    "alias-bomb": (_billion_laughs(), "expands to more than 10000 values"),
    "self-alias": ("a: &a [*a]\n", "an alias refers to a collection that contains it"),
    "mapping-key": (BASE + "? [a, b]\n: 1\n", "a list is used as a key"),
    "bad-int-tag": (
        BASE.replace("num_speculative_tokens: 4", "num_speculative_tokens: !!int x"),
        "`x` is not a valid !!int",
    ),
    "bad-float-tag": (BASE + "serving: {gpu_memory_fraction: !!float ''}\n", "not a valid !!float"),
    "bad-timestamp-tag": (
        BASE.replace("model: Qwen/Qwen3-8B", "model: Qwen/Qwen3-8B, revision: !!timestamp x"),
        "reads as a date",
    ),
    "bad-bool-tag": (BASE + "deploy: {baseline: !!bool x}\n", "`x` is not a valid !!bool"),
    "python-tag": ("!!python/object/apply:os.system ['true']\n", "is not allowed"),
    "5000-digit-int": (BASE + f"serving: {{max_model_len: {'9' * 5000}}}\n", "5000 characters"),
    "5000-digit-version": (
        BASE.replace('version: "0.32.0"', f'version: "0.{"3" * 5000}"'),
        "engine.version",
    ),
    "deep-nesting": ("a: " + "[" * 200_000 + "\n", "nested deeper than 32 levels"),
    "not-utf8": (BASE.encode().decode() + "metadata: {name: \udcff}\n", "is not UTF-8"),
}


def _write(path: Path, text: str) -> Path:
    path.write_bytes(text.encode("utf-8", errors="surrogateescape"))
    return path


@pytest.mark.parametrize("case", sorted(YAML_CASES))
def test_hostile_yaml_is_exit_3_with_a_position(tmp_path: Path, case: str) -> None:
    text, message = YAML_CASES[case]
    path = _write(tmp_path / "p.yaml", text)
    run = specdeploy("validate", str(path), "--offline")
    assert run.returncode == 3, run.output
    assert message in run.output
    assert f"{path}:" in run.output  # file:line:col (or the file, for whole-file problems)


def test_alias_bomb_finishes_in_seconds_within_the_memory_cap(tmp_path: Path) -> None:
    run = specdeploy("validate", str(_write(tmp_path / "bomb.yaml", _billion_laughs())))
    assert run.returncode == 3 and run.seconds < 10  # was 46 s and 5 GB, then MemoryError


@pytest.mark.parametrize("kind", ["fifo", "device", "oversize", "directory-entry"])
def test_a_profile_that_is_not_a_small_regular_file_is_refused(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "p.yaml"
    if kind == "fifo":
        os.mkfifo(path)  # nobody writes: reading it would block forever
        expected = "is a named pipe (FIFO), not a regular file"
    elif kind == "device":
        path.symlink_to("/dev/zero")  # reading it would never end
        expected = "is a character device, not a regular file"
    elif kind == "oversize":
        path.write_text(BASE + "# " + "x" * (2 << 20) + "\n")
        expected = "is larger than 1 MiB"
    else:
        path.mkdir()
        (path / "x").write_text(BASE)
        expected = "is a directory"  # click refuses a directory before specdeploy reads anything
    run = specdeploy("validate", str(path), "--offline")
    assert run.returncode == (2 if kind == "directory-entry" else 3), run.output
    assert expected in run.output


BOUNDS_CASES = {
    "tp-600-digit-hex": ("hardware: {tensor_parallel_size: 0x" + "f" * 600 + "}", "hardware.tensor_parallel_size"),
    "tp-infinite": ("hardware: {tensor_parallel_size: 1.0e+400}", "hardware.tensor_parallel_size"),
    "tp-2000": ("hardware: {tensor_parallel_size: 2000}", "less than or equal to 1024"),
    "tp-true": ("hardware: {tensor_parallel_size: true}", "valid integer (got True)"),
    "tp-float": ("hardware: {pipeline_parallel_size: 2.0}", "valid integer (got 2.0)"),
    "max-model-len": ("serving: {max_model_len: 4294967296}", "serving.max_model_len"),
    "max-concurrency": ("serving: {max_concurrency: 1099511627776}", "serving.max_concurrency"),
    "batch-limit": (
        "vllm: {max_num_batched_tokens: 99999999999999999999}",
        "vllm.max_num_batched_tokens",
    ),
    "replicas": ("deploy: {replicas: 2147483648}", "less than or equal to 2147483647"),
    "fraction-nan": ("serving: {gpu_memory_fraction: .nan}", "serving.gpu_memory_fraction"),
    "model-id-300": ("target: {model: " + "m" * 300 + "}", "a directory name at most 255 bytes"),
    "model-tilde-user": ("target: {model: ~mallory/models/x}", "starts with ~user"),
    "model-nul": ('target: {model: "a\\0b"}', "NUL"),
    "name-newline": ('metadata: {name: "x\\n"}', "is not a DNS-1123 label"),
    "namespace-newline": ('metadata: {name: x, namespace: "llm\\n"}', "metadata.namespace"),
    "secret-name-newline": ('deploy: {hf_token_secret: "hf-token\\n"}', "not a valid Secret name"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BOUNDS_CASES))
def test_out_of_bounds_values_are_exit_3_naming_the_field(tmp_path: Path, case: str) -> None:
    section, expected = BOUNDS_CASES[case]
    key = section.split(":", 1)[0]
    kept = "\n".join(line for line in BASE.splitlines() if not line.startswith(f"{key}:"))
    path = _write(tmp_path / "p.yaml", kept + "\n" + section + "\n")
    out = tmp_path / "out"
    run = specdeploy("render", str(path), "--out", str(out), "--offline")
    assert run.returncode == 3, run.output
    assert expected in run.output
    assert not out.exists()
