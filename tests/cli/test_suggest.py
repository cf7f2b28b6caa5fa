"""`specdeploy suggest`: the ranked table with sources, JSON, exit codes, and `--write DIR`
profiles that `validate` accepts with exit 0."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from click.testing import CliRunner, Result

from orchestrator.cli import cli


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def test_text_lists_options_sources_and_rejections() -> None:
    result = run("suggest", "meta-llama/Llama-3.3-70B-Instruct", "--offline")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "4 x H100-80GB" in out
    assert "yuhuili/EAGLE3-LLaMA3.3-Instruct-70B" in out
    assert "supported by: vllm >=" in out and "source: https://" in out
    assert "rejected (" in out and "hidden size does not match" in out
    assert "not a measurement" in out and "Traceback" not in result.output


def test_json_document() -> None:
    result = run("suggest", "Qwen/Qwen3-8B", "--offline", "--format", "json", "--workload", "code")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["request"]["workload"] == "code"
    assert doc["placement"]["tensor_parallel_size"] == 1
    first = doc["options"][0]
    assert first["kind"] == "head" and first["method"] == "eagle3"
    assert {"vllm", "sglang", "trtllm"} <= set(first["supported_by"])
    assert first["memory"]["max_concurrency"] <= first["memory"]["baseline_max_concurrency"]
    assert first["acceptance"]["sources"]
    assert first["speedup_at_concurrency_1"] > 0
    assert all(r["reason"] for r in doc["rejected"])


def test_written_profiles_validate_with_exit_0(tmp_path: Path) -> None:
    out = tmp_path / "options"
    result = run(
        "suggest",
        "Qwen/Qwen3-32B",
        "--offline",
        "--engine",
        "all",
        "--concurrency",
        "8",
        "--write",
        str(out),
    )
    assert result.exit_code == 0, result.output
    files = sorted(out.glob("*.yaml"))
    assert len(files) >= 6 and {"vllm", "sglang", "trtllm"} <= {f.name.split("-")[1] for f in files}
    text = files[0].read_text()
    assert text.startswith("# Written by `specdeploy suggest Qwen/Qwen3-32B")
    assert "Expected acceptance:" in text and "Predicted speedup:" in text
    assert yaml.safe_load(text)["deploy"]["baseline"] is True
    checked = run("validate", *map(str, files), "--offline", "--format", "json")
    assert checked.exit_code == 0, checked.output
    assert all(doc["exit_code"] == 0 for doc in json.loads(checked.stdout))


def test_a_local_target_writes_paths_relative_to_dir(tmp_path: Path) -> None:
    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "checkpoints"
    models = tmp_path / "models"
    for name in ("qwen3-8b", "qwen3-0.6b"):
        (models / name).mkdir(parents=True)
        for file in (fixtures / name).iterdir():
            (models / name / file.name).write_bytes(file.read_bytes())
    out = tmp_path / "out"
    result = run("suggest", str(models / "qwen3-8b"), "--offline", "--write", str(out))
    assert result.exit_code == 0, result.output
    draft = next(out.glob("*draft-model*.yaml"))
    assert yaml.safe_load(draft.read_text())["proposer"]["model"] == "../models/qwen3-0.6b"
    assert run("validate", str(draft), "--offline").exit_code == 0


def test_exit_codes() -> None:
    unknown = run("suggest", "nobody/no-such-model", "--offline")
    assert unknown.exit_code == 4 and "fix:" in unknown.stderr
    bad_gpu = run("suggest", "Qwen/Qwen3-8B", "--gpu", "H300", "--offline")
    assert bad_gpu.exit_code == 2 and "H200" in bad_gpu.stderr
    too_big = run("suggest", "deepseek-ai/DeepSeek-R1", "--offline")
    assert too_big.exit_code == 0 and "no options" in too_big.stdout and "H200" in too_big.stdout
