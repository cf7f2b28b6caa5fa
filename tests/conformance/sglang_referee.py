"""SGLang 0.5.23 as a referee: parse and resolve a rendered `sglang.launch_server` argv.

Runs inside the SGLang venv (.venv-sglang/bin/python), never imported by pytest. Reads one JSON
request per line on stdin (`{"argv": [...], "resolve": true}`, the tokens after
`python3 -m sglang.launch_server`) and writes one JSON result per line to the original stdout.
In 0.5.23 `prepare_server_args` only parses (argparse types and choices); `resolve_once()` fills
in defaults and applies the speculative hooks, and `check_server_args()` validates
(python/sglang/srt/server_args.py; shared/reference/feasibility_k8s.md §5). Resolution needs
`--device cpu` on a machine without an accelerator; the caller appends it.
`{"finished": [...]}` asks for the /metrics its metrics collector writes after those requests.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import traceback
from typing import Any

RESULTS = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(2, 1)
sys.stdout = sys.stderr

from sglang.srt.server_args import prepare_server_args  # noqa: E402

FIELDS = (
    "model_path",
    "served_model_name",
    "device",
    "tp_size",
    "context_length",
    "max_running_requests",
    "mem_fraction_static",
    "dtype",
    "kv_cache_dtype",
    "enable_metrics",
    "cuda_graph_max_bs",
    "disable_overlap_schedule",
    "speculative_algorithm",
    "speculative_draft_model_path",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "speculative_adaptive",
    "speculative_adaptive_config",
    "attention_backend",
)


def referee(argv: list[str], resolve: bool) -> dict[str, Any]:
    """Parse, then (optionally) resolve and check; report the first stage that refuses."""
    stage = "parse"
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            args = prepare_server_args(argv)
        if resolve:
            stage = "resolve"
            args.resolve_once()
            stage = "check"
            args.check_server_args()
    except SystemExit as exc:  # argparse: unknown flag, bad type or choice
        lines = errors.getvalue().strip().splitlines()
        return {"ok": False, "stage": stage, "error": lines[-1] if lines else str(exc)}
    except Exception as exc:
        last = traceback.format_exception_only(type(exc), exc)[-1].strip()
        return {"ok": False, "stage": stage, "error": last}
    # After resolve_once() the effective values live in resolved_dict(), not on the attributes.
    values = args.resolved_dict() if resolve else vars(args)
    resolved = {name: values.get(name) for name in FIELDS}
    return {"ok": True, "stage": "done", "resolved": resolved}


def adaptive_steps(path: str, initial_steps: int, batch_sizes: list[int]) -> dict[str, Any]:
    """The draft length SGLang's own adaptive controller picks at each batch size for the config
    file at `path`: `loaded`, as loaded; `seen`, every length it picked at that batch size while
    each slot was fed long runs of all-accepted, then all-rejected verifies (a slot that may
    move, moves during them)."""
    from sglang.srt.speculative.adaptive_spec_params import AdaptiveSpeculativeParams

    try:
        params = AdaptiveSpeculativeParams(initial_steps=initial_steps, cfg_path=path)
        loaded = [params.get_steps_for_batch(b) for b in batch_sizes]
        seen: dict[int, set[int]] = {
            b: {steps} for b, steps in zip(batch_sizes, loaded, strict=True)
        }
        for accepted in (64, 0):
            for b in batch_sizes:
                for _ in range(200):
                    params.on_verify_complete([accepted] * b, batch_size=b)
                    seen[b].add(params.get_steps_for_batch(b))
    except Exception as exc:
        return {"ok": False, "error": traceback.format_exception_only(type(exc), exc)[-1].strip()}
    return {"ok": True, "loaded": loaded, "seen": [sorted(seen[b]) for b in batch_sizes]}


def finished_requests(model: str, requests: list[dict[str, float]]) -> dict[str, Any]:
    """The /metrics exposition SGLang's own tokenizer-side collector writes after these requests
    finished (`observe_one_finished_request`, what the tokenizer manager calls per request):
    each `{"generation_tokens", "e2e_latency", "time_per_output_token"}`. The server's config is
    published first, as the HTTP server does before its collector exists (`publish(server_args,
    role="tokenizer")`, sglang/srt/entrypoints/http_server.py), for a `model` on this disk."""
    import prometheus_client
    from sglang.srt.observability.metrics_collector import TokenizerMetricsCollector
    from sglang.srt.runtime_context import publish
    from sglang.srt.server_args import ServerArgs

    labels = {"model_name": "referee"}
    try:
        publish(ServerArgs(model_path=model, device="cpu", enable_metrics=True), role="tokenizer")
        collector = TokenizerMetricsCollector(labels=labels)
        for request in requests:
            collector.observe_one_finished_request(
                labels,
                prompt_tokens=8,
                generation_tokens=int(request["generation_tokens"]),
                cached_tokens=0,
                e2e_latency=float(request["e2e_latency"]),
                has_grammar=False,
                is_streaming=True,
                time_per_output_token=float(request["time_per_output_token"]),
            )
    except Exception as exc:
        return {"ok": False, "error": traceback.format_exception_only(type(exc), exc)[-1].strip()}
    return {"ok": True, "exposition": prometheus_client.generate_latest().decode()}


def main() -> None:
    for line in sys.stdin:
        if line.strip():
            request = json.loads(line)
            if "finished" in request:
                result = finished_requests(request["model"], request["finished"])
            elif "adaptive" in request:
                result = adaptive_steps(
                    request["adaptive"], int(request["initial_steps"]), request["batch_sizes"]
                )
            else:
                result = referee(request["argv"], bool(request.get("resolve", True)))
            RESULTS.write(json.dumps(result, default=str) + "\n")


if __name__ == "__main__":
    main()
