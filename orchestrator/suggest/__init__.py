"""Suggest: the compatible proposers of a target with their cost and expected gain, as profiles.

`candidates` (what to check) -> `profiles` (one real Profile per candidate and engine, and the
shared placement) -> `build` (planned with `plan_profile`, estimated with `bench.planned`) ->
`report` (text and JSON) and `write` (one commented profile per option).
"""

from typing import Final

#: The file that marks a directory as written by `specdeploy suggest --write` (and so
#: replaceable by the next one). Here, not in `write`, so the CLI's help can name it cheaply.
WRITE_MARKER: Final = ".specdeploy-suggest"
