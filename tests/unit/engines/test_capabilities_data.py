"""Consistency of the capability matrix data (orchestrator/engines/capabilities.yaml).

The loader folds release entries in version order, so a missing source, an unparseable or unsorted
version, or a feature switch the engine modules consult but no entry defines would silently change
what gets rendered. These tests read the YAML as data and check it against the loader and the
engine modules' source; the last class pins the facts that were verified in the released packages
(see docs/engine-matrix.md for the evidence behind each one).
"""

from __future__ import annotations

import re
from importlib import resources
from typing import Any, get_args

import pytest

from orchestrator.engines.capabilities import matrix, parse_version, release_for
from orchestrator.errors import ProfileError
from orchestrator.profile.schema import ENGINE_NAMES, SpecMethod

#: The supported range of issue #2: vLLM from 0.10 (V1 engine), SGLang from 0.4.9, TensorRT-LLM 1.0.
OLDEST = {"vllm": "0.10.0", "sglang": "0.4.9", "trtllm": "1.0.0"}
RELEASE_KEYS = {
    "version",
    "adds_methods",
    "drops_methods",
    "adds_features",
    "drops_features",
    "adds_eagle3_architectures",
    "adds_mtp_architectures",
    "notes",
    "source",
    "verified",
}
SPEC_METHODS = set(get_args(SpecMethod)) - {"none"}
ARCHITECTURE = re.compile(r"^[A-Z][A-Za-z0-9_]*$")
FEATURE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
HAS_CALL = re.compile(r"""\.has\(\s*["']([^"']+)["']\s*\)""")


def releases(engine: str) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = matrix()[engine]["releases"]
    return entries


def all_releases() -> list[tuple[str, dict[str, Any]]]:
    return [(engine, entry) for engine in ENGINE_NAMES for entry in releases(engine)]


def release_id(item: tuple[str, dict[str, Any]]) -> str:
    return f"{item[0]}-{item[1].get('version')}"


def features_consulted(engine: str) -> set[str]:
    """Feature names the engine module asks `release.has(...)` about, read from its source."""
    source = resources.files("orchestrator.engines").joinpath(f"{engine}.py").read_text("utf-8")
    return set(HAS_CALL.findall(source))


def features_defined(engine: str) -> set[str]:
    return {name for entry in releases(engine) for name in entry.get("adds_features", ())}


class TestReleaseEntries:
    @pytest.mark.parametrize("item", all_releases(), ids=release_id)
    def test_has_a_source_and_a_verified_flag(self, item: tuple[str, dict[str, Any]]) -> None:
        _, entry = item
        assert isinstance(entry.get("source"), str) and entry["source"].strip()
        assert isinstance(entry.get("verified"), bool)

    @pytest.mark.parametrize("item", all_releases(), ids=release_id)
    def test_uses_only_known_keys(self, item: tuple[str, dict[str, Any]]) -> None:
        _, entry = item
        assert set(entry) <= RELEASE_KEYS, f"unknown keys {set(entry) - RELEASE_KEYS}"

    @pytest.mark.parametrize("item", all_releases(), ids=release_id)
    def test_lists_are_lists_of_strings(self, item: tuple[str, dict[str, Any]]) -> None:
        _, entry = item
        for key in RELEASE_KEYS - {"version", "source", "verified"}:
            value = entry.get(key, [])
            assert isinstance(value, list), key
            assert all(isinstance(v, str) and v for v in value), key

    @pytest.mark.parametrize("item", all_releases(), ids=release_id)
    def test_names_are_well_formed(self, item: tuple[str, dict[str, Any]]) -> None:
        _, entry = item
        for key in ("adds_methods", "drops_methods"):
            assert set(entry.get(key, ())) <= SPEC_METHODS, key
        for key in ("adds_features", "drops_features"):
            assert all(FEATURE.match(f) for f in entry.get(key, ())), key
        for key in ("adds_eagle3_architectures", "adds_mtp_architectures"):
            assert all(ARCHITECTURE.match(a) for a in entry.get(key, ())), key


class TestVersions:
    @pytest.mark.parametrize("engine", ENGINE_NAMES)
    def test_versions_are_quoted_parseable_sorted_and_unique(self, engine: str) -> None:
        versions = [entry["version"] for entry in releases(engine)]
        assert all(isinstance(v, str) for v in versions), "quote versions: YAML reads 0.10 as 0.1"
        parsed = [parse_version(v) for v in versions]
        assert parsed == sorted(parsed), f"{engine} releases are not in version order"
        assert len(set(parsed)) == len(parsed), f"{engine} lists a release twice"

    @pytest.mark.parametrize("engine", ENGINE_NAMES)
    def test_oldest_release_is_the_supported_floor(self, engine: str) -> None:
        assert releases(engine)[0]["version"] == OLDEST[engine]

    @pytest.mark.parametrize("engine", ENGINE_NAMES)
    def test_a_release_below_the_floor_is_refused(self, engine: str) -> None:
        major, minor, *_ = parse_version(OLDEST[engine])
        older = f"{major}.{minor - 1}.0" if minor else f"{major - 1}.99.0"
        with pytest.raises(ProfileError, match="older than the oldest supported release"):
            release_for(engine, older)  # type: ignore[arg-type]

    @pytest.mark.parametrize("engine", ENGINE_NAMES)
    def test_oldest_release_supports_speculation(self, engine: str) -> None:
        assert release_for(engine, OLDEST[engine]).methods - {"none"}  # type: ignore[arg-type]


class TestFeatures:
    @pytest.mark.parametrize("engine", ENGINE_NAMES)
    def test_every_feature_an_engine_module_consults_is_defined(self, engine: str) -> None:
        missing = features_consulted(engine) - features_defined(engine)
        assert not missing, f"orchestrator/engines/{engine}.py asks about undefined {missing}"

    @pytest.mark.parametrize("engine", ENGINE_NAMES)
    def test_drops_only_remove_what_an_earlier_entry_added(self, engine: str) -> None:
        seen_features: set[str] = set()
        seen_methods: set[str] = set()
        for entry in releases(engine):
            for name in entry.get("drops_features", ()):
                assert name in seen_features, f"{entry['version']} drops unknown feature {name}"
            for name in entry.get("drops_methods", ()):
                assert name in seen_methods, f"{entry['version']} drops unknown method {name}"
            seen_features |= set(entry.get("adds_features", ()))
            seen_methods |= set(entry.get("adds_methods", ()))

    @pytest.mark.parametrize("engine", ENGINE_NAMES)
    def test_no_architecture_is_added_twice(self, engine: str) -> None:
        for key in ("adds_eagle3_architectures", "adds_mtp_architectures"):
            added = [a for entry in releases(engine) for a in entry.get(key, ())]
            duplicates = {a for a in added if added.count(a) > 1}
            assert not duplicates, f"{engine} {key} repeats {duplicates}"


class TestRemovedFlagsAndKeys:
    @pytest.mark.parametrize("engine", ENGINE_NAMES)
    def test_removed_flags_are_complete(self, engine: str) -> None:
        for removed in matrix()[engine].get("removed_flags", ()):
            assert str(removed["flag"]).startswith("-"), removed
            parse_version(str(removed["removed_in"]))
            assert str(removed["replacement"]).strip() and str(removed["source"]).strip()

    @pytest.mark.parametrize("engine", ENGINE_NAMES)
    def test_removed_config_keys_are_complete(self, engine: str) -> None:
        for removed in matrix()[engine].get("removed_config_keys", ()):
            assert re.match(r"^[a-z_]+$", str(removed["key"])), removed
            parse_version(str(removed["removed_in"]))
            assert str(removed["replacement"]).strip() and str(removed["source"]).strip()


class TestVerifiedFacts:
    """Facts read in the released packages themselves (docs/engine-matrix.md lists the files)."""

    @pytest.mark.parametrize(
        ("version", "has_draft_model"), [("0.14.0", False), ("0.14.1", False), ("0.15.0", True)]
    )
    def test_vllm_draft_model_returns_in_015(self, version: str, has_draft_model: bool) -> None:
        # vllm 0.14.0 arg_utils.py still raises NotImplementedError; 0.15.0 ships DraftModelProposer.
        assert ("draft_model" in release_for("vllm", version).methods) is has_draft_model

    @pytest.mark.parametrize(("version", "unified"), [("0.10.2", False), ("0.11.0", True)])
    def test_vllm_mtp_is_unified_from_011(self, version: str, unified: bool) -> None:
        assert release_for("vllm", version).has("mtp-unified-method") is unified

    def test_vllm_010_eagle3_targets_are_llama_only(self) -> None:
        # 0.10.0 SpeculativeConfig: "Eagle3 is only supported for Llama models".
        assert release_for("vllm", "0.10.0").eagle3_architectures == {"LlamaForCausalLM"}

    @pytest.mark.parametrize(
        ("version", "decode_flag"), [("0.5.13", False), ("0.5.14", True), ("0.5.23", True)]
    )
    def test_sglang_decode_graph_flag_from_0514(self, version: str, decode_flag: bool) -> None:
        assert release_for("sglang", version).has("cuda-graph-max-bs-decode") is decode_flag

    @pytest.mark.parametrize(("version", "removed"), [("0.5.19", False), ("0.5.20", True)])
    def test_sglang_old_graph_flag_removed_in_0520(self, version: str, removed: bool) -> None:
        assert (
            release_for("sglang", version).removed("--cuda-graph-max-bs") is not None
        ) is removed

    @pytest.mark.parametrize(
        ("version", "methods"),
        [
            ("0.4.9", {"eagle", "eagle3", "mtp"}),
            ("0.5.2", {"eagle", "eagle3", "mtp", "draft_model"}),
            ("0.5.3", {"eagle", "eagle3", "mtp", "draft_model", "ngram"}),
        ],
    )
    def test_sglang_algorithms_by_release(self, version: str, methods: set[str]) -> None:
        assert release_for("sglang", version).methods - {"none"} == methods

    @pytest.mark.parametrize(
        ("version", "config_flag", "eagle3", "nextn"),
        [
            ("1.1.0", False, False, True),
            ("1.2.1", True, False, True),
            ("1.3.0rc21", True, True, False),
        ],
    )
    def test_trtllm_spellings_by_release(
        self, version: str, config_flag: bool, eagle3: bool, nextn: bool
    ) -> None:
        """--config from 1.2.0 and no Eagle3 key up to 1.2.1 (tests/fixtures/trtllm)."""
        release = release_for("trtllm", version)
        assert release.has("config-flag") is config_flag
        assert release.has("eagle3-decoding-type") is eagle3
        assert release.has("mtp-nextn-field") is nextn
