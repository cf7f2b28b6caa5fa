"""The engine names specdeploy knows. A leaf module (no imports of its own), so the profile schema
can type `engine.name` without loading any engine: adding an engine means adding its name here,
its module to `ENGINE_CLASSES` in `orchestrator/engines/__init__.py`, and its section to
`capabilities.yaml` (docs/adding-an-engine.md)."""

from __future__ import annotations

from typing import Final, Literal

EngineName = Literal["vllm", "sglang", "trtllm"]
ENGINE_NAMES: Final[tuple[EngineName, ...]] = ("vllm", "sglang", "trtllm")
