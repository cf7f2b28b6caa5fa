"""Loading: safe YAML, duplicate keys, positions, field paths and "did you mean"."""

from __future__ import annotations

import pytest

from orchestrator.profile.loading import ProfileInvalid, parse_profile

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


def _issues(text: str) -> ProfileInvalid:
    with pytest.raises(ProfileInvalid) as info:
        parse_profile(text, "demo.yaml")
    return info.value


class TestParseProfile:
    def test_valid_profile_loads_with_defaults(self) -> None:
        profile = parse_profile(VALID)
        assert profile.proposer.num_speculative_tokens == 5
        assert profile.serving.port == 8000
        assert profile.speculative

    def test_typo_names_line_column_path_and_suggestion(self) -> None:
        err = _issues(VALID.replace("num_speculative_tokens", "num_speculative_token"))
        assert err.issues[0].path == "proposer.num_speculative_token"
        assert (err.issues[0].line, err.issues[0].column) == (13, 3)
        assert "did you mean 'num_speculative_tokens'" in err.what
        assert "demo.yaml:13:3" in err.what
        assert err.fix == "rename `num_speculative_token` to `num_speculative_tokens`"

    def test_duplicate_key_is_an_error_not_last_wins(self) -> None:
        err = _issues(VALID + "  method: ngram\n")
        assert err.issues[0].path == "proposer.method"
        assert "duplicate key (first set on line 11)" in err.issues[0].message

    def test_duplicate_top_level_section(self) -> None:
        err = _issues(VALID + "engine:\n  name: sglang\n  version: '0.5.23'\n")
        assert err.issues[0].path == "engine"

    def test_bad_literal_suggests_closest_value(self) -> None:
        err = _issues(VALID.replace("name: vllm", "name: vlm"))
        assert "did you mean 'vllm'" in err.what
        assert err.fix == "set `engine.name: vllm`"

    @pytest.mark.parametrize(
        ("method", "fix"),
        [
            ("suffix", "use `proposer.method: ngram`"),  # vLLM's, model-free like ngram
            ("medusa", "use `proposer.method: eagle3`"),
            ("dflash", "`specdeploy suggest MODEL`"),
        ],
    )
    def test_an_engine_method_without_rules_is_named_and_refused_with_why(
        self, method: str, fix: str
    ) -> None:
        err = _issues(VALID.replace("method: draft_model", f"method: {method}"))
        [issue] = err.issues
        assert (issue.path, issue.line) == ("proposer.method", 11)
        assert issue.message.startswith(f"'{method}' is ") and "specdeploy checks" in issue.message
        assert f"no pairing, memory or flag rules for {method}" in err.why
        assert fix in err.fix and f"or deploy {method} without specdeploy" in err.fix

    @pytest.mark.parametrize(("spelled", "ours"), [("STANDALONE", "draft_model"), ("nextn", "mtp")])
    def test_an_engines_spelling_of_a_method_points_at_ours(self, spelled: str, ours: str) -> None:
        err = _issues(VALID.replace("method: draft_model", f"method: {spelled}"))
        assert f"'{spelled}' is an engine's name for {ours}" in err.what
        assert err.fix == f"set `proposer.method: {ours}`"

    def test_every_problem_is_reported(self) -> None:
        text = VALID.replace("num_speculative_tokens: 5", "num_speculative_tokens: 0\n  revison: x")
        err = _issues(text)
        assert {i.path for i in err.issues} == {
            "proposer.num_speculative_tokens",
            "proposer.revison",
        }

    def test_yaml_syntax_error_has_position(self) -> None:
        err = _issues("apiVersion: [unclosed\n")
        assert err.issues[0].line is not None
        assert "YAML syntax" in err.issues[0].message

    def test_unsafe_yaml_tags_are_refused(self) -> None:
        err = _issues("!!python/object/apply:os.system ['true']\n")
        assert "YAML syntax" in err.issues[0].message

    def test_empty_file(self) -> None:
        assert "empty" in _issues("").issues[0].message

    def test_not_a_mapping(self) -> None:
        assert "mapping" in _issues("- a\n- b\n").issues[0].message

    def test_missing_required_field(self) -> None:
        err = _issues(VALID.replace("target:\n  model: Qwen/Qwen3-8B\n", ""))
        assert err.issues[0].path == "target"
        assert err.issues[0].message == "required field is missing"


class TestProfileRules:
    def test_draft_model_needs_a_model(self) -> None:
        err = _issues(VALID.replace("  model: Qwen/Qwen3-0.6B\n", ""))
        assert "needs proposer.model" in err.what

    @pytest.mark.parametrize("method", ["mtp", "ngram", "none"])
    def test_model_not_allowed_for_method(self, method: str) -> None:
        err = _issues(VALID.replace("method: draft_model", f"method: {method}"))
        assert "takes no proposer.model" in err.what

    def test_engine_block_must_match_engine_and_points_at_the_block(self) -> None:
        err = _issues(VALID + "sglang:\n  eagle_topk: 2\n")
        assert "engine.name is 'vllm'" in err.what
        assert err.what.startswith("demo.yaml:14:1: sglang: ")

    def test_missing_gpu_points_at_the_field(self) -> None:
        err = _issues(VALID + "hardware:\n  gpu: null\n")
        assert err.what.startswith("demo.yaml:15:3: hardware.gpu: required on device: gpu")

    def test_name_must_be_dns1123(self) -> None:
        err = _issues(VALID.replace("name: demo", "name: Demo_1"))
        assert "DNS-1123" in err.what

    def test_name_must_start_with_a_letter_to_name_services(self) -> None:
        err = _issues(VALID.replace("name: demo", "name: 4b-demo"))
        assert "demo.yaml:4:3: metadata.name:" in err.what and "DNS-1035" in err.what

    def test_name_leaves_room_for_the_longest_derived_name(self) -> None:
        assert parse_profile(VALID.replace("name: demo", f"name: {'d' * 47}"))
        err = _issues(VALID.replace("name: demo", f"name: {'d' * 48}"))
        assert "has 48 characters" in err.what and "at most 47" in err.what
        assert f"{'d' * 48}-baseline-leader" in err.what

    def test_token_is_refused_as_secret_name(self) -> None:
        err = _issues(VALID + "deploy:\n  hf_token_secret: hf_abcdefghijklmnop\n")
        assert "looks like a Hugging Face token" in err.what
        assert "hf_abcdefghijklmnop" not in err.fix

    def test_ngram_window_order(self) -> None:
        text = VALID.replace("method: draft_model\n  model: Qwen/Qwen3-0.6B", "method: ngram")
        err = _issues(text + "  ngram: {min_window: 5, max_window: 2}\n")
        assert "min_window=5 is larger than max_window=2" in err.what

    def test_as_baseline_drops_only_the_proposer(self) -> None:
        profile = parse_profile(VALID)
        baseline = profile.as_baseline()
        assert baseline.proposer.method == "none" and not baseline.speculative
        assert baseline.target == profile.target and baseline.serving == profile.serving


class TestDraftLengthSchedule:
    """proposer.num_speculative_tokens_per_batch_size: the schema checks only its shape and bounds
    (what vLLM accepts inside it is a rule, tests/unit/compatibility/test_schedule_rules.py)."""

    FIELD = "proposer.num_speculative_tokens_per_batch_size"

    def _with(self, schedule: str) -> str:
        return VALID + f"  num_speculative_tokens_per_batch_size: {schedule}\n"

    def test_loads_as_entries_of_three(self) -> None:
        profile = parse_profile(self._with("[[1, 8, 5], [9, 64, 2], [65, 1024, 0]]"))
        assert profile.proposer.num_speculative_tokens_per_batch_size == (
            (1, 8, 5),
            (9, 64, 2),
            (65, 1024, 0),
        )
        assert parse_profile(VALID).proposer.num_speculative_tokens_per_batch_size is None

    def test_what_vllm_judges_is_left_to_the_rules(self) -> None:
        # Overlapping, not from 1, a bound of 0, k above num_speculative_tokens: all load.
        parse_profile(self._with("[[2, 8, 9], [0, 4, 3], [4, 8, 2]]"))

    @pytest.mark.parametrize(
        ("schedule", "where", "said"),
        [
            ("[[1, 8, 33]]", "[0][2]", "less than or equal to 32 (got 33)"),
            ("[[1, 8, -1]]", "[0][2]", "greater than or equal to 0 (got -1)"),
            ("[[1, 2000000, 3]]", "[0][1]", "less than or equal to 1000000"),
            ("[[1, 8, true]]", "[0][2]", "valid integer (got True)"),
            ("[[1, 8.0, 3]]", "[0][1]", "valid integer (got 8.0)"),
            ("[[1, 8]]", "[0]", "has 2 values: an entry is [range_start, range_end, "),
            ("[5]", "[0]", "is not a list: an entry is"),
            ("3", "", "is not a list of [range_start, range_end, num_speculative_tokens]"),
            ("[]", "", "is empty"),
        ],
    )
    def test_shape_and_bounds_are_checked_at_the_entry(
        self, schedule: str, where: str, said: str
    ) -> None:
        err = _issues(self._with(schedule))
        (line,) = err.what.splitlines()  # one problem, one line: nothing about the whole list
        assert "demo.yaml:14:" in line and f"{self.FIELD}{where}: " in line and said in line

    def test_at_most_64_ranges(self) -> None:
        entries = ", ".join(f"[{n}, {n}, 1]" for n in range(1, 66))
        err = _issues(self._with(f"[{entries}]"))
        assert "has 65 ranges, more than 64" in err.what and "merge" in err.fix

    def test_the_baseline_twin_has_no_schedule(self) -> None:
        profile = parse_profile(self._with("[[1, 8, 5]]"))
        assert profile.as_baseline().proposer.num_speculative_tokens_per_batch_size is None


class TestTokensAt:
    """ProposerSpec.tokens_at: the draft length at a batch size, as vLLM's dense lookup gives it
    (checked against vLLM 0.32.0's own lookup in tests/conformance)."""

    def _proposer(self, schedule: str | None):  # type: ignore[no-untyped-def]
        extra = f"  num_speculative_tokens_per_batch_size: {schedule}\n" if schedule else ""
        return parse_profile(VALID + extra).proposer  # num_speculative_tokens: 5

    def test_ranges_gaps_and_the_tail_keep_the_k_before_them(self) -> None:
        proposer = self._proposer("[[17, 32, 2], [1, 8, 4], [64, 64, 0]]")  # any order
        expected = {1: 4, 8: 4, 9: 4, 16: 4, 17: 2, 32: 2, 33: 2, 63: 2, 64: 0, 10_000: 0}
        assert {batch: proposer.tokens_at(batch) for batch in expected} == expected

    def test_a_k_above_num_speculative_tokens_is_clamped(self) -> None:
        proposer = self._proposer("[[1, 4, 9], [5, 8, 3]]")
        assert [proposer.tokens_at(b) for b in (1, 4, 5, 100)] == [5, 5, 3, 3]

    def test_without_a_schedule_every_load_drafts_num_speculative_tokens(self) -> None:
        proposer = self._proposer(None)
        assert {proposer.tokens_at(b) for b in (1, 64, 4096)} == {5}
