"""The layered test bed is what it claims: the target's layers after the first write nothing
(its logits equal its first layer's, i.e. the exact draft's), and the noisy draft disagrees on
some greedy tokens but not most. Checked with transformers in the vLLM venv (no server)."""

from __future__ import annotations

import json
import subprocess

import pytest

from orchestrator.dev.layered import TARGET_LAYERS, make_layered_models
from orchestrator.dev.tiny_models import DEFAULT_DIR
from tests.e2e.servers import VLLM_PYTHON, require_vllm
from tests.support import REPO_ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

CHECK = """
import json, sys, torch, transformers
target, draft, noisy = (transformers.AutoModelForCausalLM.from_pretrained(p).eval() for p in sys.argv[1:4])
ids = torch.arange(4, 68).reshape(2, 32)
with torch.no_grad():
    t, d, n = (m(ids).logits for m in (target, draft, noisy))
print(json.dumps({
    "layers": [target.config.num_hidden_layers, draft.config.num_hidden_layers],
    "max_abs_diff": float((t - d).abs().max()),
    "noisy_agreement": float((t.argmax(-1) == n.argmax(-1)).float().mean()),
}))
"""


def test_the_draft_is_the_targets_first_layer_and_noise_lowers_agreement() -> None:
    require_vllm()
    models = make_layered_models(REPO_ROOT / DEFAULT_DIR, python=str(VLLM_PYTHON))
    paths = [str(models.target), str(models.draft), str(models.noisy_draft)]
    result = subprocess.run(
        [str(VLLM_PYTHON), "-c", CHECK, *paths], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found["layers"] == [TARGET_LAYERS, 1]
    assert found["max_abs_diff"] < 1e-4  # the same function, 12 layers against 1
    assert 0.3 < found["noisy_agreement"] < 0.95
