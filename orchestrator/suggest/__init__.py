"""Suggest: the compatible proposers of a target with their cost and expected gain, as profiles.

`candidates` (what to check) -> `profiles` (one real Profile per candidate and engine, and the
shared placement) -> `build` (planned with `plan_profile`, estimated with `bench.planned`) ->
`report` (text and JSON) and `write` (one commented profile per option).
"""
