"""Expected acceptance: a proposer's own published figure first, else a sourced prior for its
method; different methods get different priors, and nothing is invented for EAGLE-1."""

from __future__ import annotations

import pytest

from orchestrator.bench.acceptance import (
    METHOD_PRIORS,
    SINGLE_LAYER_DECAY,
    VLLM_PER_POSITION,
    AcceptanceCurve,
    acceptance_for,
    usable,
)
from orchestrator.checkpoint.catalog import catalog_entries, catalog_entry

CATALOG = catalog_entries()


def head(model: str):  # type: ignore[no-untyped-def]
    entry = catalog_entry(model)
    assert entry is not None, model
    return entry


class TestCurve:
    @pytest.mark.parametrize("length,k,decay", [(2.93, 3, 1.0), (2.1, 3, 0.95), (4.5, 7, 0.9)])
    def test_matching_reproduces_the_published_length(
        self, length: float, k: int, decay: float
    ) -> None:
        assert AcceptanceCurve.matching(length, k, decay).mean_length(k) == pytest.approx(length)

    def test_the_depth_decay_comes_from_vllm_per_position_measurements(self) -> None:
        # vLLM's EAGLE-3 baselines: the chance of accepting position i given i-1 falls with i
        for measurement in VLLM_PER_POSITION:
            rates = measurement.conditional()
            assert rates[0] > rates[-1]
        assert 0.85 < SINGLE_LAYER_DECAY < 1.0


class TestPublishedFirst:
    def test_a_heads_own_figure_for_the_workload_is_used(self) -> None:
        found = acceptance_for(
            "eagle3", "chat", head=head("lmsys/sglang-EAGLE3-LLaMA3.1-Instruct-8B"), catalog=CATALOG
        )
        assert found is not None and found.kind == "published"
        assert found.curve.mean_length(3) == pytest.approx(2.93)
        assert "mtbench" in found.label and found.sources[0].startswith("https://github.com/")

    def test_the_workload_picks_the_dataset(self) -> None:
        entry = head("lmsys/sglang-EAGLE3-LLaMA3.1-Instruct-8B")
        code = acceptance_for("eagle3", "code", head=entry, catalog=CATALOG)
        assert code is not None and code.curve.mean_length(3) == pytest.approx(3.05)

    def test_a_tree_or_unstated_draft_length_is_not_used_as_a_chain_figure(self) -> None:
        tree = head("yuhuili/EAGLE3-LLaMA3.3-Instruct-70B")  # 5.88 with topk 8, 64 draft tokens
        assert not any(usable(f) for f in tree.published_acceptance)
        found = acceptance_for("eagle3", "chat", head=tree, catalog=CATALOG)
        assert found is not None and found.kind == "prior"
        assert found.curve.mean_length(3) < 4.0
        assert "not comparable" in found.label and "5.88" in found.label


class TestPriors:
    def test_each_method_has_its_own_prior(self) -> None:
        lengths = {
            method: acceptance_for(method, "chat", catalog=CATALOG).curve.mean_length(3)  # type: ignore[union-attr]
            for method in ("eagle3", "mtp", "draft_model", "ngram")
        }
        assert len(set(round(v, 2) for v in lengths.values())) == 4, lengths
        assert lengths["ngram"] < lengths["draft_model"] < lengths["eagle3"]

    def test_the_eagle3_prior_is_the_median_of_the_catalogs_published_figures(self) -> None:
        found = acceptance_for("eagle3", "chat", catalog=CATALOG)
        assert found is not None and found.kind == "prior"
        assert "median" in found.label and len(found.sources) >= 3
        assert 2.0 < found.curve.mean_length(3) < 3.0

    def test_mtp_decays_with_depth_from_the_deepseek_figure(self) -> None:
        found = acceptance_for("mtp", "chat")
        assert found is not None
        rates = found.curve.rates(4)
        assert rates[0] == pytest.approx(0.85)
        assert list(rates) == sorted(rates, reverse=True) and rates[-1] < rates[0]
        assert any("2412.19437" in s for s in found.sources)

    def test_code_and_chat_priors_differ_for_ngram(self) -> None:
        code = acceptance_for("ngram", "code")
        chat = acceptance_for("ngram", "chat")
        assert code is not None and chat is not None
        assert code.curve.mean_length(5) > chat.curve.mean_length(5)

    def test_every_prior_names_a_source(self) -> None:
        for prior in METHOD_PRIORS.values():
            assert prior.source.startswith("https://")

    def test_no_figure_is_invented_for_eagle1_heads(self) -> None:
        found = acceptance_for(
            "eagle", "chat", head=head("yuhuili/EAGLE-LLaMA3.1-Instruct-8B"), catalog=CATALOG
        )
        assert found is None
