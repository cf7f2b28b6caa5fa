"""The CLI contract (DESIGN.md §4): exit codes, JSON documents, fix lines, no tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from orchestrator.cli import cli
from tests.support import EXAMPLE_PROFILES, write_profile


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def assert_user_error(result: Result, code: int) -> None:
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "fix:" in result.stderr


class TestValidate:
    def test_examples_validate_as_json(self) -> None:
        result = run("validate", *map(str, EXAMPLE_PROFILES), "--format", "json", "--offline")
        assert result.exit_code == 0, result.output
        documents = json.loads(result.stdout)
        assert len(documents) == len(EXAMPLE_PROFILES)
        for doc in documents:
            assert doc["ok"] is True
            assert set(doc) >= {"profile", "ok", "findings", "memory"}
            for finding in doc["findings"]:
                assert set(finding) >= {"rule", "severity", "what", "why", "fix"}

    def test_typo_exits_3_with_position_and_suggestion(self, tmp_path: Path) -> None:
        path = write_profile(
            tmp_path, proposer={"method": "draft_model", "model": "d", "num_speculative_token": 5}
        )
        result = run("validate", str(path))
        assert_user_error(result, 3)
        assert f"{path}:" in result.stderr
        assert "proposer.num_speculative_token" in result.stderr
        assert "did you mean 'num_speculative_tokens'" in result.stderr

    def test_typo_as_json_still_prints_a_document(self, tmp_path: Path) -> None:
        path = write_profile(
            tmp_path, proposer={"method": "draft_model", "model": "d", "num_speculative_token": 5}
        )
        result = run("validate", str(path), "--format", "json")
        assert result.exit_code == 3
        doc = json.loads(result.stdout)
        assert doc["ok"] is False
        assert doc["findings"][0]["rule"] == "profile.unknown-field"
        assert doc["findings"][0]["field"] == "proposer.num_speculative_token"

    def test_duplicate_key_exits_3(self, tmp_path: Path) -> None:
        path = write_profile(tmp_path)
        path.write_text(path.read_text() + "metadata:\n  name: again\n")
        result = run("validate", str(path))
        assert_user_error(result, 3)
        assert "duplicate key" in result.stderr

    def test_sglang_tree_with_overlap_validates_on_0_5_23(self, tmp_path: Path) -> None:
        # SGLang's own EAGLE-3 example shape (3 steps, topk 4, 16 draft tokens), overlap on.
        path = write_profile(
            tmp_path,
            engine={"name": "sglang", "version": "0.5.23"},
            proposer={
                "method": "draft_model",
                "model": "Qwen/Qwen3-0.6B",
                "num_speculative_tokens": 3,
            },
            sglang={"eagle_topk": 4, "num_draft_tokens": 16},
        )
        result = run("validate", str(path), "--offline")
        assert result.exit_code == 0, result.output
        assert "engine.sglang-" not in result.output

    def test_sglang_tree_larger_than_its_candidates_exits_4(self, tmp_path: Path) -> None:
        path = write_profile(
            tmp_path,
            engine={"name": "sglang", "version": "0.5.23"},
            proposer={
                "method": "draft_model",
                "model": "Qwen/Qwen3-0.6B",
                "num_speculative_tokens": 2,
            },
            sglang={"eagle_topk": 2, "num_draft_tokens": 8},
        )
        result = run("validate", str(path), "--offline")
        assert_user_error(result, 4)
        assert "engine.sglang-draft-tokens" in result.stderr

    def test_removed_vllm_flag_exits_4(self, tmp_path: Path) -> None:
        path = write_profile(tmp_path, serving={"extra_args": ["--speculative-model", "x"]})
        result = run("validate", str(path))
        assert_user_error(result, 4)
        assert "engine.removed-flag" in result.stderr

    def test_ignore_skips_a_rule(self, tmp_path: Path) -> None:
        path = write_profile(tmp_path, serving={"extra_args": ["--speculative-model", "x"]})
        assert (
            run("validate", str(path), "--ignore", "engine.removed-flag", "--offline").exit_code
            == 0
        )

    def test_strict_turns_warnings_into_errors(self, tmp_path: Path) -> None:
        path = write_profile(tmp_path, engine={"name": "vllm", "version": "0.99.0"})
        assert (
            run("validate", str(path), "--offline", "--ignore", "pairing.revision-pinned").exit_code
            == 0
        )
        result = run(
            "validate", str(path), "--strict", "--offline", "--ignore", "pairing.revision-pinned"
        )
        assert result.exit_code == 4 and "engine.version-unknown" in result.stderr

    def test_too_old_engine_exits_3(self, tmp_path: Path) -> None:
        path = write_profile(tmp_path, engine={"name": "vllm", "version": "0.9.2"})
        result = run("validate", str(path))
        assert_user_error(result, 3)
        assert "older than the oldest supported release 0.10.0" in result.stderr

    def test_several_profiles_exit_with_the_first_code_that_applies(self, tmp_path: Path) -> None:
        bad_yaml = write_profile(
            tmp_path,
            "a.yaml",
            proposer={"method": "draft_model", "model": "d", "num_speculative_token": 5},
        )
        incompatible = write_profile(
            tmp_path, "b.yaml", serving={"extra_args": ["--speculative-model", "x"]}
        )
        assert run("validate", str(incompatible), str(bad_yaml)).exit_code == 3

    def test_missing_file_is_a_usage_error(self) -> None:
        result = run("validate", "no/such/profile.yaml")
        assert result.exit_code == 2 and "Traceback" not in result.output


class TestRender:
    def test_writes_launch_json_and_baseline(self, tmp_path: Path) -> None:
        out = tmp_path / "out"
        profile = next(p for p in EXAMPLE_PROFILES if p.stem == "vllm-qwen3-4b-draft")
        result = run("render", str(profile), "--out", str(out), "--offline")
        assert result.exit_code == 0, result.output
        launch = json.loads((out / "launch.json").read_text())
        assert set(launch) >= {"image", "argv", "env", "port"}
        baseline = json.loads((out / "baseline" / "launch.json").read_text())
        spec_free = [
            a for a in launch["argv"] if a != "--speculative-config" and not a.startswith("{")
        ]
        assert baseline["argv"] == spec_free

    def test_writes_nothing_when_invalid(self, tmp_path: Path) -> None:
        path = write_profile(tmp_path, serving={"extra_args": ["--speculative-model", "x"]})
        out = tmp_path / "out"
        result = run("render", str(path), "--out", str(out))
        assert_user_error(result, 4)
        assert not out.exists()

    def test_trtllm_writes_its_yaml_beside_launch(self, tmp_path: Path) -> None:
        profile = next(p for p in EXAMPLE_PROFILES if p.stem.startswith("trtllm"))
        out = tmp_path / "out"
        assert run("render", str(profile), "--out", str(out), "--offline").exit_code == 0
        assert (out / "extra-llm-api-config.yaml").is_file()

    def test_local_model_dir_becomes_absolute_path(self, tmp_path: Path) -> None:
        (tmp_path / "models" / "target").mkdir(parents=True)
        path = write_profile(
            tmp_path,
            target={"model": "models/target"},
            proposer={"method": "ngram", "num_speculative_tokens": 3},
        )
        out = tmp_path / "out"
        run(
            "render", str(path), "--out", str(out), "--offline", "--ignore", "checkpoint.unresolved"
        )
        argv: list[Any] = json.loads((out / "launch.json").read_text())["argv"]
        assert argv[2] == str((tmp_path / "models" / "target").resolve())


class TestOtherCommands:
    def test_schema_is_json_schema_with_descriptions(self) -> None:
        result = run("schema")
        schema = json.loads(result.stdout)
        proposer = schema["$defs"]["ProposerSpec"]["properties"]
        assert "never infers" in proposer["method"]["description"]

    def test_engines_lists_each_engine(self) -> None:
        result = run("engines")
        assert result.exit_code == 0
        for name in ("vllm", "sglang", "trtllm"):
            assert name in result.stdout
        data = json.loads(run("engines", "--format", "json").stdout)
        assert {"vllm", "sglang", "trtllm"} <= set(data)

    def test_explain_a_rule(self) -> None:
        result = run("explain", "engine.sglang-overlap-topk")
        assert (
            result.exit_code == 0
            and "overlap scheduler" in result.stdout
            and "source:" in result.stdout
        )

    def test_explain_unknown_rule_suggests(self) -> None:
        result = run("explain", "engine.removed-flags")
        assert_user_error(result, 1)
        assert "did you mean 'engine.removed-flag'" in result.stderr


@pytest.mark.parametrize("profile", EXAMPLE_PROFILES, ids=lambda p: p.stem)
def test_every_example_validates_in_text(profile: Path) -> None:
    result = run("validate", str(profile), "--offline")
    assert result.exit_code == 0, result.output
    assert ": ok" in result.stdout


DESIGN_MEMORY_KEYS = {
    "gpu", "gpu_memory_gib", "budget_gib", "target_weights_gib", "draft_weights_gib",
    "overhead_gib", "kv_cache_gib", "kv_bytes_per_token", "kv_tokens", "max_concurrency",
    "baseline_max_concurrency", "fits",
}  # fmt: skip


def test_memory_block_has_every_contract_key() -> None:
    profile = next(p for p in EXAMPLE_PROFILES if p.stem == "vllm-qwen3-4b-draft")
    document = json.loads(run("validate", str(profile), "--format", "json", "--offline").stdout)
    assert set(document["memory"]) >= DESIGN_MEMORY_KEYS
    assert document["memory"]["max_concurrency"] <= document["memory"]["baseline_max_concurrency"]


def test_debug_shows_the_traceback_of_a_user_error(tmp_path: Path) -> None:
    plain = run("explain", "no.such-rule")
    assert plain.exit_code == 1 and "Traceback" not in plain.output
    debug = run("--debug", "explain", "no.such-rule")
    assert debug.exit_code == 1 and "Traceback" in debug.stderr and "fix:" in debug.stderr


def test_validate_loads_no_client_sdk_or_template_engine() -> None:
    # Start-up cost (issue 2): `validate` runs on every edit of a profile, so the Kubernetes,
    # Docker, hub and HTTP clients, plotting and Jinja load only in the commands that use them.
    heavy = (
        "kubernetes",
        "docker",
        "huggingface_hub",
        "httpx",
        "aiohttp",
        "matplotlib",
        "jinja2",
        "logging",
    )
    profile = next(p for p in EXAMPLE_PROFILES if p.stem == "vllm-qwen3-4b-draft")
    code = (
        "import sys\nfrom orchestrator.cli import cli\n"
        f"try:\n    cli(['validate', {str(profile)!r}, '--offline'])\nexcept SystemExit as exit:\n"
        "    assert exit.code == 0, exit.code\n"
        f"print(sorted(m for m in {heavy!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout


def test_the_collector_runs_again_once_a_command_is_loaded() -> None:
    # The CLI pauses the cyclic collector while it imports a command's module (start-up); a
    # long-running command (bench, operator) must then collect as usual, or cycles would pile up.
    code = (
        "import gc, sys\nfrom orchestrator.cli import cli\n"
        "assert gc.isenabled()\n"
        "command = cli.get_command(None, 'bench')\n"
        "print(command is not None, gc.isenabled(), gc.get_freeze_count() > 0)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True", "True"], out.stdout + out.stderr
