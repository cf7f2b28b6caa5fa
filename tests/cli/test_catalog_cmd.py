"""`specdeploy catalog add|list|show` through the CLI, with an isolated user catalog and HF cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from orchestrator.cli import cli
from tests.support import write_profile

TESTS = Path(__file__).resolve().parents[1]
FIXTURES = TESTS / "fixtures" / "checkpoints"
HF_CACHE = TESTS / "fixtures" / "hf_cache"
CACHED = "specdeploy-fixtures/tiny-qwen3"
COMMIT = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """An empty user catalog and an empty HF cache of this test's own, and no hub."""
    (tmp_path / "hub").mkdir()
    return {
        "SPECDEPLOY_CATALOG": str(tmp_path / "config" / "catalog.json"),
        "HF_HUB_CACHE": str(tmp_path / "hub"),
        "HF_HUB_OFFLINE": "1",
    }


def run(env: dict[str, str], *args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env=env)


def assert_user_error(result: Result, code: int) -> None:
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output and "fix:" in result.stderr


class TestAcceptance:
    def test_a_recorded_checkpoint_validates_offline_by_its_hub_id(
        self, env: dict[str, str], tmp_path: Path
    ) -> None:
        profile = write_profile(
            tmp_path,
            target={"model": "acme/qwen3-8b-ft"},
            proposer={"method": "draft_model", "model": "acme/qwen3-0.6b-draft",
                      "num_speculative_tokens": 4},
        )  # fmt: skip
        before = run(env, "validate", str(profile), "--offline", "--format", "json")
        assert before.exit_code == 4
        assert "checkpoint.unresolved" in {f["rule"] for f in json.loads(before.stdout)["findings"]}

        for directory, name in (
            ("qwen3-8b", "acme/qwen3-8b-ft"),
            ("qwen3-0.6b", "acme/qwen3-0.6b-draft"),
        ):
            added = run(env, "catalog", "add", str(FIXTURES / directory), "--as", name)
            assert added.exit_code == 0, added.output
            assert f"recorded {name} in {env['SPECDEPLOY_CATALOG']}" in added.stdout

        after = run(env, "validate", str(profile), "--offline", "--format", "json")
        assert after.exit_code == 0, after.output
        findings = json.loads(after.stdout)["findings"]
        assert "checkpoint.unresolved" not in {f["rule"] for f in findings}
        tokenizer = [f for f in findings if f["rule"] == "pairing.draft-tokenizer"]
        assert tokenizer == []  # compared by the recorded tokenizer content, found identical
        inspected = run(env, "inspect", "acme/qwen3-8b-ft", "--offline", "--format", "json")
        doc = json.loads(inspected.stdout)
        assert doc["catalog"] == "user" and doc["tokenizer"]["vocab_len"] > 0
        assert doc["location"].startswith(f"user catalog {env['SPECDEPLOY_CATALOG']}")


class TestAdd:
    def test_a_cached_hub_model_is_recorded_at_its_revision(self, env: dict[str, str]) -> None:
        env = {**env, "HF_HUB_CACHE": str(HF_CACHE)}
        result = run(env, "catalog", "add", CACHED, "--format", "json")
        assert result.exit_code == 0, result.output
        doc = json.loads(result.stdout)
        assert doc["model"] == CACHED and doc["replaced"] is False
        assert doc["added_from"].startswith("Hugging Face cache") and COMMIT in doc["added_from"]
        assert doc["facts"]["revision"] == COMMIT and doc["facts"]["hidden_size"] == 1024

    def test_a_cache_snapshot_directory_names_itself(self, env: dict[str, str]) -> None:
        snapshot = HF_CACHE / f"models--{CACHED.replace('/', '--')}" / "snapshots" / COMMIT
        result = run(env, "catalog", "add", str(snapshot))
        assert result.exit_code == 0, result.output
        assert f"recorded {CACHED}" in result.stdout

    def test_another_directory_needs_a_hub_id(self, env: dict[str, str]) -> None:
        result = run(env, "catalog", "add", str(FIXTURES / "qwen3-8b"))
        assert result.exit_code == 2 and "--as ORG/NAME" in result.stderr
        assert "Traceback" not in result.output

    def test_the_hub_id_must_have_an_org(self, env: dict[str, str]) -> None:
        result = run(env, "catalog", "add", str(FIXTURES / "qwen3-8b"), "--as", "qwen3")
        assert result.exit_code == 2 and "ORG/NAME" in result.stderr

    def test_nothing_to_read_exits_4(self, env: dict[str, str], tmp_path: Path) -> None:
        assert_user_error(run(env, "catalog", "add", "acme/not-cached", "--offline"), 4)
        empty = tmp_path / "empty"
        empty.mkdir()
        result = run(env, "catalog", "add", str(empty), "--as", "acme/empty")
        assert_user_error(result, 4)
        assert "has no config.json" in result.stderr

    def test_a_model_only_the_built_in_catalog_knows_is_not_recorded(
        self, env: dict[str, str]
    ) -> None:
        result = run(env, "catalog", "add", "Qwen/Qwen3-8B", "--offline")
        assert_user_error(result, 4)
        assert "only a catalog entry" in result.stderr
        assert not Path(env["SPECDEPLOY_CATALOG"]).exists()


class TestAddNamesAndShadows:
    @pytest.mark.parametrize("name", ["a/..", "a/" + "x" * 300, "acme/x--y", "acme/-x"])
    def test_an_id_the_hub_refuses_is_exit_2_with_what_why_fix(
        self, env: dict[str, str], name: str
    ) -> None:
        result = run(env, "catalog", "add", str(FIXTURES / "qwen3-8b"), "--as", name)
        assert result.exit_code == 2, result.output
        assert "is not a hub id" in result.stderr and "why:" in result.stderr
        assert "fix: pass --as ORG/NAME" in result.stderr and "Traceback" not in result.output
        assert not Path(env["SPECDEPLOY_CATALOG"]).exists()

    def test_a_built_in_id_is_recorded_with_a_warning_naming_the_entry(
        self, env: dict[str, str]
    ) -> None:
        result = run(env, "catalog", "add", str(FIXTURES / "qwen3-0.6b"), "--as", "Qwen/Qwen3-8B")
        assert result.exit_code == 0, result.output
        assert result.stderr.startswith(
            "Warning: Qwen/Qwen3-8B shadows the built-in catalog entry Qwen/Qwen3-8B "
            "(models/qwen3.json)"
        )
        assert env["SPECDEPLOY_CATALOG"] in result.stderr and "fix:" in result.stderr
        again = run(env, "catalog", "add", str(FIXTURES / "qwen3-0.6b"), "--as", "qwen/qwen3-8b",
                    "--format", "json")  # fmt: skip
        doc = json.loads(again.stdout)
        assert doc["replaced"] is True
        assert doc["shadows"] == {
            "model": "Qwen/Qwen3-8B",
            "catalog": "built-in",
            "location": "models/qwen3.json",
        }

    def test_an_id_of_its_own_shadows_nothing(self, env: dict[str, str]) -> None:
        result = run(env, "catalog", "add", str(FIXTURES / "qwen3-0.6b"), "--as", "acme/small",
                     "--format", "json")  # fmt: skip
        assert result.exit_code == 0 and result.stderr == ""
        assert json.loads(result.stdout)["shadows"] is None

    def test_validate_names_the_user_catalog_as_the_source(
        self, env: dict[str, str], tmp_path: Path
    ) -> None:
        run(env, "catalog", "add", str(FIXTURES / "qwen3-0.6b"), "--as", "Qwen/Qwen3-8B")
        profile = write_profile(tmp_path, target={"model": "Qwen/Qwen3-8B"},
                                proposer={"method": "ngram", "num_speculative_tokens": 4})  # fmt: skip
        text = run(env, "validate", str(profile), "--offline")
        assert "info checkpoint.user-catalog" in text.stdout
        said = f"facts from the user catalog {env['SPECDEPLOY_CATALOG']}"
        assert said in text.stdout and "shadows the built-in catalog entry" in text.stdout
        doc = json.loads(run(env, "validate", str(profile), "--offline", "--format", "json").stdout)
        (finding,) = [f for f in doc["findings"] if f["rule"] == "checkpoint.user-catalog"]
        assert said in finding["what"] and finding["field"] == "target.model"


class TestListAndShow:
    def test_list_puts_user_entries_first(self, env: dict[str, str]) -> None:
        run(env, "catalog", "add", str(FIXTURES / "qwen3-8b"), "--as", "acme/qwen3")
        rows = json.loads(run(env, "catalog", "list", "--format", "json").stdout)
        assert rows[0]["model"] == "acme/qwen3" and rows[0]["catalog"] == "user"
        assert len(rows) >= 121 and {r["catalog"] for r in rows[1:]} == {"built-in"}
        text = run(env, "catalog", "list", "--catalog", "user").stdout
        assert "acme/qwen3" in text and "1 models (1 in the user catalog)" in text

    def test_show_a_head_with_its_verifier_and_published_acceptance(
        self, env: dict[str, str]
    ) -> None:
        result = run(env, "catalog", "show", "lmsys/SGLang-EAGLE3-Llama-3.1-8B-Instruct-SpecForge",
                     "--format", "json")  # fmt: skip
        doc = json.loads(result.stdout)
        assert result.exit_code == 0 and doc["catalog"] == "built-in" and doc["roles"] == ["head"]
        assert doc["verifier"] == "meta-llama/Llama-3.1-8B-Instruct"
        assert doc["facts"]["eagle"]["generation"] == "eagle3"
        assert {a["dataset"] for a in doc["published_acceptance"]} == {
            "mtbench",
            "humaneval",
            "gsm8k",
        }
        assert all(
            a["source"].startswith("https://github.com/") for a in doc["published_acceptance"]
        )

    def test_show_as_text_names_unverified_facts_and_sources(self, env: dict[str, str]) -> None:
        result = run(env, "catalog", "show", "yuhuili/EAGLE3-LLaMA3.3-Instruct-70B")
        assert result.exit_code == 0
        assert "verifier:   meta-llama/Llama-3.3-70B-Instruct" in result.stdout
        assert "unverified: hidden_size" in result.stdout and "acceptance: 5.88" in result.stdout

    def test_show_prefers_the_user_catalog(self, env: dict[str, str]) -> None:
        run(env, "catalog", "add", str(FIXTURES / "qwen3-8b"), "--as", "Qwen/Qwen3-8B")
        doc = json.loads(run(env, "catalog", "show", "qwen/qwen3-8b", "--format", "json").stdout)
        assert doc["catalog"] == "user" and doc["facts"]["tokenizer"] is not None

    def test_show_an_unknown_model_exits_4_with_a_suggestion(self, env: dict[str, str]) -> None:
        result = run(env, "catalog", "show", "Qwen/Qwen3-8C")
        assert_user_error(result, 4)
        assert "did you mean Qwen/Qwen3-8B" in result.stderr

    def test_a_damaged_user_catalog_is_a_warning_and_is_not_written_over(
        self, env: dict[str, str]
    ) -> None:
        path = Path(env["SPECDEPLOY_CATALOG"])
        path.parent.mkdir(parents=True)
        path.write_text("{", encoding="utf-8")
        listed = run(env, "catalog", "list")
        assert listed.exit_code == 0 and "Qwen/Qwen3-8B" in listed.stdout
        assert listed.stderr.count(f"Warning: user catalog {path} is skipped") == 1
        assert "fix:" in listed.stderr
        assert_user_error(run(env, "catalog", "add", str(FIXTURES / "qwen3-8b"), "--as", "a/b"), 4)
        assert path.read_text(encoding="utf-8") == "{"
