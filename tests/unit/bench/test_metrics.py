"""Prometheus parsing and acceptance derivation for vLLM, SGLang and TensorRT-LLM."""

from __future__ import annotations

import pytest

from orchestrator.bench.metrics import acceptance, parse_prometheus, phase_times

VLLM_BEFORE = """
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 10.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 30.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 15.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 9.0
vllm:request_queue_time_seconds_sum{model_name="m"} 1.0
vllm:request_queue_time_seconds_count{model_name="m"} 2.0
vllm:request_decode_time_seconds_sum{model_name="m"} 4.0
vllm:request_decode_time_seconds_count{model_name="m"} 2.0
"""
VLLM_AFTER = """
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 110.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 100.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 330.0
vllm:spec_decode_num_draft_tokens_total{engine="1",model_name="m"} 300.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 165.0
vllm:spec_decode_num_accepted_tokens_total{engine="1",model_name="m"} 150.0
vllm:request_queue_time_seconds_sum{model_name="m"} 3.0
vllm:request_queue_time_seconds_count{model_name="m"} 6.0
vllm:request_decode_time_seconds_sum{model_name="m"} 12.0
vllm:request_decode_time_seconds_count{model_name="m"} 6.0
"""


class TestParse:
    def test_sums_label_sets_and_skips_comments_and_junk(self) -> None:
        samples = parse_prometheus(VLLM_AFTER + 'garbage line\nx{a="1"} NaN\ny 1e3 1700000000\n')
        assert samples["vllm:spec_decode_num_drafts_total"] == 210.0
        assert samples["y"] == 1000.0
        assert "x" not in samples


class TestAcceptance:
    def test_vllm_interval_difference(self) -> None:
        got = acceptance(parse_prometheus(VLLM_BEFORE), parse_prometheus(VLLM_AFTER))
        assert got is not None and got.engine == "vllm"
        # interval: drafts 200, drafted 600, accepted 300
        assert got.acceptance_rate == pytest.approx(0.5)
        assert got.mean_acceptance_length == pytest.approx(2.5)

    def test_vllm_without_drafts_in_the_interval(self) -> None:
        same = parse_prometheus(VLLM_BEFORE)
        assert acceptance(same, same) is None

    def test_no_spec_metrics(self) -> None:
        assert acceptance({}, parse_prometheus("vllm:num_requests_running 0\n")) is None

    def test_sglang_gauges(self) -> None:
        after = parse_prometheus("sglang:spec_accept_length 2.75\nsglang:spec_accept_rate 0.44\n")
        got = acceptance({}, after)
        assert got is not None
        assert (got.engine, got.mean_acceptance_length, got.acceptance_rate) == (
            "sglang",
            2.75,
            0.44,
        )

    def test_trtllm_counters(self) -> None:
        before = parse_prometheus(
            "trtllm_spec_decode_num_draft_tokens_total 10\n"
            "trtllm_spec_decode_num_accepted_tokens_total 5\n"
        )
        after = parse_prometheus(
            "trtllm_spec_decode_num_draft_tokens_total 50\n"
            "trtllm_spec_decode_num_accepted_tokens_total 35\n"
            "trtllm_spec_decode_acceptance_length 3.1\n"
        )
        got = acceptance(before, after)
        assert got is not None
        assert got.acceptance_rate == pytest.approx(0.75)
        assert got.mean_acceptance_length == 3.1


def test_phase_times_are_interval_means() -> None:
    got = phase_times(parse_prometheus(VLLM_BEFORE), parse_prometheus(VLLM_AFTER))
    assert got is not None
    assert got.queue_s == pytest.approx(0.5)
    assert got.decode_s == pytest.approx(2.0)
    assert got.prefill_s is None


def test_serving_counters_that_make_no_finite_figure_give_none() -> None:
    """A twin's /metrics may lie: 1e300 seconds over 1e-300 requests or tokens is no figure."""
    from orchestrator.engines import ENGINES

    after = parse_prometheus(
        "vllm:e2e_request_latency_seconds_sum 1e300\n"
        "vllm:e2e_request_latency_seconds_count 3\n"
        "vllm:request_time_per_output_token_seconds_sum 1e300\n"
        "vllm:request_time_per_output_token_seconds_count 1e-300\n"
        "vllm:request_generation_tokens_sum 1e-300\n"
    )
    window = ENGINES["vllm"].metrics.serving({}, after)
    assert window is not None
    assert window.tpot_s is None and window.seconds_per_token is None
