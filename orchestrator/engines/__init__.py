"""Engine stage: one module per engine, each a pure function from LaunchSpec to EngineLaunch."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from orchestrator.engines.base import Engine, EngineLaunch, LaunchSpec
from orchestrator.engines.sglang import SglangEngine
from orchestrator.engines.trtllm import TrtllmEngine
from orchestrator.engines.vllm import VllmEngine

ENGINES: Final[Mapping[str, Engine]] = {
    e.name: e for e in (VllmEngine(), SglangEngine(), TrtllmEngine())
}

__all__ = ["ENGINES", "Engine", "EngineLaunch", "LaunchSpec"]
