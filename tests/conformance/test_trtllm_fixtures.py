"""The TensorRT-LLM fixtures are well formed and pinned, and extract.py (the re-check tool) reads
the two page formats it is meant for (synthetic pages written here, same markup)."""

from __future__ import annotations

import importlib.util
import re
from types import ModuleType

import pytest

from tests.conformance.trtllm_referee import FIXTURES, fixture, releases

PINNED = re.compile(r"^https://github\.com/NVIDIA/TensorRT-LLM/blob/[0-9a-f]{40}/")


def extractor() -> ModuleType:
    spec = importlib.util.spec_from_file_location("trtllm_extract", FIXTURES / "extract.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("version", releases())
def test_fixture_is_pinned_and_self_consistent(version: str) -> None:
    data = fixture(version)
    assert data["release"] == version
    for page in data["read_at"].values():
        assert PINNED.match(page["url"]), page["url"]
        assert f"/{version}/" in page["url"]
    models = data["llm_args"]["models"]
    for spec in models.values():
        assert spec.get("base", "BaseLlmArgs") in models
        assert len(set(spec["fields"])) == len(spec["fields"])
    for target in models["TorchLlmArgs"]["nested"].values():
        assert target in models or target == "DecodingBaseConfig.from_dict"
    for name in ("Eagle", "NGram", "DraftTarget", "MTP"):
        assert data["llm_args"]["decoding_types"][name] in models
    serve = data["serve"]
    assert set(serve["aliases"].values()) <= set(serve["options"])


VIEWCODE = """<div class="highlight"><pre>
<a class="viewcode-back" href="#">[docs]</a><span class="k">class</span> <span class="nc">DecodingBaseConfig</span><span class="p">(</span>StrictBaseModel<span class="p">):</span>
<span class="w">    </span><span class="sd">&quot;&quot;&quot;</span>
<span class="sd">    Note: not a field.</span>
<span class="sd">    &quot;&quot;&quot;</span>
    <span class="n">max_draft_len</span><span class="p">:</span> <span class="n">Optional</span><span class="p">[</span>int<span class="p">]</span> = None
    <span class="n">decoding_type</span><span class="p">:</span> <span class="n">ClassVar</span><span class="p">[</span>str<span class="p">]</span> = &quot;x&quot;
    <span class="n">_private</span><span class="p">:</span> bool = PrivateAttr(True)
<a class="viewcode-back" href="#">[docs]</a>    <span class="nd">@classmethod</span>
    <span class="k">def</span> <span class="nf">from_dict</span>(cls, data):
        classes = {<span class="s2">&quot;NGram&quot;</span>: NGramDecodingConfig, <span class="s2">&quot;Eagle&quot;</span>: EagleDecodingConfig}
    <span class="n">speculative_model</span><span class="p">:</span> str = Field(
        default=None)

<span class="k">class</span> <span class="nc">NGramDecodingConfig</span>(DecodingBaseConfig):
    <span class="n">max_matching_ngram_size</span><span class="p">:</span> int = 0
</pre></div>"""
SERVE_PAGE = """
<dt class="sig sig-object std" id="cmdoption-trtllm-serve-serve-tensor_parallel_size">
<span class="sig-name descname"><span class="pre">--tensor_parallel_size</span></span><span class="sig-prename descclassname"><span class="pre">,</span> </span><span class="sig-name descname"><span class="pre">--tp_size</span></span><span class="sig-prename descclassname"> <span class="pre">&lt;tensor_parallel_size&gt;</span></span></dt>
<dt class="sig sig-object std" id="cmdoption-trtllm-serve-serve-trust_remote_code">
<span class="sig-name descname"><span class="pre">--trust_remote_code</span></span></dt>
<dt class="sig sig-object std" id="cmdoption-trtllm-serve-disaggregated-c">
<span class="pre">--config_file</span> <span class="pre">&lt;config_file&gt;</span></dt>
"""


def test_extractor_reads_viewcode_and_sphinx_click_markup() -> None:
    found = extractor().extract(VIEWCODE, SERVE_PAGE)
    assert found["classes"] == {
        "DecodingBaseConfig": ["max_draft_len", "speculative_model"],
        "NGramDecodingConfig": ["max_matching_ngram_size"],
    }
    assert found["decoding_types"] == {
        "NGram": "NGramDecodingConfig",
        "Eagle": "EagleDecodingConfig",
    }
    assert found["serve_options"] == {
        "--tensor_parallel_size": "value",
        "--tp_size": "value",
        "--trust_remote_code": "flag",
    }


def test_extractor_check_reports_a_difference() -> None:
    module = extractor()
    found = module.extract(VIEWCODE, SERVE_PAGE)
    problems = module.differences(found, fixture("1.2.1"))
    assert any(p.startswith("DecodingBaseConfig: page has") for p in problems), problems
