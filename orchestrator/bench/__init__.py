"""Bench: speculative vs baseline on live OpenAI-compatible endpoints, swept over load.

`workload` (what to send) -> `client` (one streamed request, timed) -> `sweep` (levels x arms,
Prometheus before/after) -> `stats` / `verdict` (speedup with interval, crossover, warnings) ->
`report` (JSON, Markdown, PNG). `estimate` is the analytic counterpart used by `plan --speedup`.
"""
