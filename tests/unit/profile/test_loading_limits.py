"""The loader's limits and the schema's bounds: what a hostile or careless profile gets instead of
a traceback, at the right line and column, with a fix; and that ordinary YAML still loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.profile.loading import (
    MAX_PROFILE_BYTES,
    ProfileInvalid,
    load_profile,
    parse_profile,
)

VALID = """\
apiVersion: specdeploy/v1
kind: SpeculativeDeployment
metadata:
  name: demo
engine:
  name: vllm
  version: "0.32.0"
target:
  model: Qwen/Qwen3-8B
proposer:
  method: draft_model
  model: Qwen/Qwen3-0.6B
  num_speculative_tokens: 5
"""


def _issue(text: str) -> ProfileInvalid:
    with pytest.raises(ProfileInvalid) as caught:
        parse_profile(text, "demo.yaml")
    return caught.value


class TestYamlLimits:
    def test_anchors_and_aliases_used_sensibly_still_load(self) -> None:
        text = VALID.replace(
            "target:\n  model: Qwen/Qwen3-8B", "target:\n  model: &t Qwen/Qwen3-8B"
        )
        text += "serving:\n  extra_args: &args [--enforce-eager]\nvllm: {enforce_eager: false}\n"
        assert parse_profile(text).target.model == "Qwen/Qwen3-8B"

    def test_a_bad_tag_is_reported_at_its_value(self) -> None:
        err = _issue(
            VALID.replace("num_speculative_tokens: 5", "num_speculative_tokens: !!int five")
        )
        (issue,) = err.issues
        assert (issue.path, issue.line, issue.column) == ("proposer.num_speculative_tokens", 13, 27)
        assert issue.message == "YAML syntax: `five` is not a valid !!int"
        assert err.fix == "fix the value or remove the explicit tag"

    def test_keys_that_are_not_names_say_how_to_quote_them(self) -> None:
        err = _issue(VALID + "yes: 1\n")
        assert "the key `yes` reads as a boolean" in err.what and err.fix.startswith(
            'quote it ("yes")'
        )

    def test_merge_keys_are_refused_with_a_fix(self) -> None:
        err = _issue(VALID + "deploy:\n  <<: {replicas: 2}\n")
        assert "merge keys (<<) are not supported" in err.what and err.fix == "write the keys out"

    def test_a_date_is_not_a_revision_until_quoted(self) -> None:
        err = _issue(
            VALID.replace("model: Qwen/Qwen3-8B", "model: Qwen/Qwen3-8B\n  revision: 2024-01-01")
        )
        assert err.issues[0].path == "target.revision" and '("2024-01-01")' in err.fix

    def test_every_collection_counts_against_the_value_budget(self) -> None:
        text = VALID + "serving:\n  extra_args: [" + ", ".join(["x"] * 10_001) + "]\n"
        assert "more than 10000 values" in _issue(text).what

    def test_huge_input_values_are_shown_short(self) -> None:
        err = _issue(VALID + "deploy: {hf_token_secret: " + "x" * 5000 + "}\n")
        assert len(err.what) < 600

    @pytest.mark.parametrize(
        "text",
        [
            "a: " + "[" * 40 + "\n",  # our event-stream check fires first
            "a: " + "[" * 1_500 + "\n",  # libyaml 0.2.6's lookahead meets its own limit first
            "a: " + "{b: " * 1_500 + "\n",
            "".join(" " * i + "k:\n" for i in range(60)),  # block style
            "a: " + "[" * 200_000 + "\n",
        ],
        ids=["flow-40", "flow-1500", "mapping-1500", "block-60", "flow-200000"],
    )
    def test_deep_nesting_says_the_same_whatever_libyaml_is_installed(self, text: str) -> None:
        (issue,) = _issue(text).issues
        assert issue.message == "YAML syntax: nested deeper than 32 levels", issue.message
        assert issue.fix == "a profile nests three levels; look for unclosed brackets"
        assert issue.line is not None and issue.column is not None


class TestReadingTheFile:
    def test_an_oversized_file_is_refused_before_parsing(self, tmp_path: Path) -> None:
        path = tmp_path / "big.yaml"
        path.write_text(VALID + "#" * MAX_PROFILE_BYTES)
        with pytest.raises(ProfileInvalid, match="is larger than 1 MiB"):
            load_profile(path)

    def test_bytes_that_are_not_utf8_have_a_position(self, tmp_path: Path) -> None:
        path = tmp_path / "latin1.yaml"
        path.write_bytes(VALID.encode() + b"# caf\xe9\n")
        with pytest.raises(ProfileInvalid) as caught:
            load_profile(path)
        (issue,) = caught.value.issues
        assert (issue.line, issue.column) == (14, 6) and "is not UTF-8" in issue.message


class TestSchemaBounds:
    @pytest.mark.parametrize(
        ("section", "message"),
        [
            (
                "hardware: {tensor_parallel_size: true}",
                "Input should be a valid integer (got True)",
            ),
            ("hardware: {tensor_parallel_size: 1025}", "less than or equal to 1024"),
            ("serving: {max_model_len: 2147483648}", "less than or equal to 2147483647"),
            ("serving: {gpu_memory_fraction: .inf}", "finite number"),
            ("deploy: {baseline: 1}", "valid boolean"),
            ("engine: {name: vllm, version: '0.32.0', image: 'a b'}", "contains a space"),
            ("deploy: {model_cache: {storage_class: 'fast\\n'}}", "not a valid StorageClass name"),
        ],
    )
    def test_strict_bounded_values(self, section: str, message: str) -> None:
        key = section.split(":", 1)[0]
        text = (
            VALID.replace('engine:\n  name: vllm\n  version: "0.32.0"\n', "")
            if key == "engine"
            else VALID
        )
        assert message in _issue(text + section + "\n").what

    def test_every_bound_value_itself_is_accepted(self) -> None:
        text = VALID + (
            "hardware: {tensor_parallel_size: 1024, pipeline_parallel_size: 1, gpus_per_node: 1024}\n"
            "serving: {max_model_len: 2147483647, max_concurrency: 2147483647, port: 65535}\n"
            "deploy: {replicas: 2147483647}\n"
        )
        profile = parse_profile(text)
        assert (
            profile.hardware.tensor_parallel_size == 1024 and profile.deploy.replicas == 2**31 - 1
        )

    @pytest.mark.parametrize(
        ("model", "message"),
        [
            ("~mallory/models/x", "starts with ~user"),
            ("m" * 256, "a directory name at most 255 bytes"),
            ("./" + "d/" * 600, "at most 1024 characters"),
        ],
    )
    def test_model_references_any_filesystem_can_hold(self, model: str, message: str) -> None:
        assert message in _issue(VALID.replace("Qwen/Qwen3-8B", model)).what

    @pytest.mark.parametrize(
        "model", ["~/models/qwen", "/abs/path", "./rel", "Qwen/Qwen3-8B", "org/m.v2"]
    )
    def test_ordinary_model_references_pass(self, model: str) -> None:
        assert parse_profile(VALID.replace("Qwen/Qwen3-8B", model)).target.model == model

    @pytest.mark.parametrize("name", ['"x\\n"', '"x\\ny"', "X", "-x"])
    def test_names_must_match_dns_1123_in_full(self, name: str) -> None:
        assert (
            "is not a DNS-1123 label" in _issue(VALID.replace("name: demo", f"name: {name}")).what
        )

    def test_engine_version_parts_are_bounded(self) -> None:
        text = VALID.replace('version: "0.32.0"', f'version: "0.{"3" * 7}.0"')
        assert _issue(text).issues[0].path == "engine.version"
