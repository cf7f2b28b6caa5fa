"""Record which model types and architectures an engine release loads without remote code.

`specdeploy dev native-models` runs a probe inside each installed engine (the referee venvs
`.venv-vllm`, `.venv-sglang`) and writes orchestrator/engines/native_models.json, which the
`checkpoint.remote-code` rule reads. A checkpoint whose config.json carries `auto_map` loads
without `trust_remote_code` only where the engine's transformers (or the engine's own config
registry) knows its `model_type` and the engine implements its architecture.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, Final

OUTPUT: Final = Path(__file__).resolve().parents[1] / "engines" / "native_models.json"

#: Run inside a vLLM install: transformers' config types plus vLLM's own config registry, and
#: the architectures vLLM's model registry serves.
VLLM_PROBE: Final = """
import json, transformers, vllm
from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
from vllm.transformers_utils.config import _CONFIG_REGISTRY
from vllm.model_executor.models.registry import ModelRegistry
print(json.dumps({
    "version": vllm.__version__,
    "transformers": transformers.__version__,
    "model_types": sorted(set(CONFIG_MAPPING_NAMES) | set(_CONFIG_REGISTRY)),
    "architectures": sorted(ModelRegistry.get_supported_archs()),
    "source": "vllm.model_executor.models.registry.ModelRegistry, "
              "vllm.transformers_utils.config._CONFIG_REGISTRY and transformers' CONFIG_MAPPING",
}))
"""

#: Run inside an SGLang install. Its registry skips model modules whose optional imports fail,
#: so architectures are read from each module's `EntryClass` instead of importing it.
SGLANG_PROBE: Final = """
import json, pathlib, re, transformers, sglang
from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
from sglang.srt.utils.hf_transformers.common import _CONFIG_REGISTRY
models = pathlib.Path(sglang.__file__).parent / "srt" / "models"
archs = set()
for path in models.glob("*.py"):
    for match in re.finditer(r"^EntryClass\\s*=\\s*(\\[[^\\]]*\\]|\\w+)", path.read_text(), re.M):
        archs.update(re.findall(r"\\w+", match.group(1)))
print(json.dumps({
    "version": sglang.__version__,
    "transformers": transformers.__version__,
    "model_types": sorted(set(CONFIG_MAPPING_NAMES) | set(_CONFIG_REGISTRY)),
    "architectures": sorted(archs),
    "source": "sglang/srt/models/*.py EntryClass, "
              "sglang.srt.utils.hf_transformers.common._CONFIG_REGISTRY and transformers' "
              "CONFIG_MAPPING",
}))
"""

PROBES: Final = {"vllm": (".venv-vllm", VLLM_PROBE), "sglang": (".venv-sglang", SGLANG_PROBE)}


def probe(python: str, script: str) -> dict[str, Any]:
    """The probe's JSON, run with `python` (the engine's interpreter)."""
    result = subprocess.run(
        [python, "-c", script], capture_output=True, text=True, check=True, timeout=600
    )
    last = result.stdout.strip().splitlines()[-1]
    data: dict[str, Any] = json.loads(last)
    return data


def record(root: Path, output: Path = OUTPUT) -> dict[str, str]:
    """Probe every engine whose venv exists under `root`; merge into `output`. Returns
    engine -> recorded release."""
    data: dict[str, Any] = json.loads(output.read_text()) if output.exists() else {}
    data["_about"] = (
        "Model types and architectures each engine release loads without trust_remote_code, "
        "recorded from the installed engine by `specdeploy dev native-models` "
        "(orchestrator/dev/native_models.py); read by the checkpoint.remote-code rule."
    )
    done: dict[str, str] = {}
    for engine, (venv, script) in PROBES.items():
        python = root / venv / "bin" / "python"
        if not python.exists():
            continue
        found = probe(str(python), script)
        version = str(found.pop("version")).split("+")[0]
        data.setdefault(engine, {})[version] = found
        done[engine] = version
    output.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return done
