"""Every source a user can read is one they can open (issue 15 §4, issue 11).

`specdeploy explain` prints each rule's source, `specdeploy engines` the capability matrix's,
`specdeploy gpus` and `catalog show` theirs. A source is accepted when it is a public location
pinned to a release or a commit (an upstream file and line at a tag or commit, an immutable issue or
pull-request thread, a docs page of that release, a paper, a PyPI release page, a hardware vendor's
spec page), or a document inside this repository. Research notes kept outside the repository are
never cited anywhere users or contributors read.

What is checked:
- sources (strict): every `Rule.source`, every `STAGE_FINDINGS[...].source`, every source an
  engine gives an fp8 KV-cache verdict (each engine x release x GPU x dtype), every `source` of
  `orchestrator/engines/capabilities.yaml` and `orchestrator/memory/gpus.yaml`, and every source of
  the checkpoint catalog. Each `;`-separated part must name an accepted URL or an in-repo document,
  and nothing in it may be a citation of another kind.
- sourced constants: the `#:` comment block above each module-level constant (`NAME = ...` or
  `NAME: Final ...`) in the modules below. A block names a source when it holds a citation token
  (a URL, a file path, an issue or PR number, a package pin `name==version`, a line number `l.N`,
  a README); then every such token must be an accepted URL or an in-repo document.
- research notes: no reference to them anywhere in the product, docs and CI.

Each failure names the place (file:line, rule id, data-file entry) and what is wrong there.
"""

from __future__ import annotations

import ast
import glob
import itertools
import json
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import get_args

import pytest
import yaml

from tests.support import REPO_ROOT

# ---------------------------------------------------------------------------------------------
# What counts as an accepted citation
# ---------------------------------------------------------------------------------------------

_SHA = r"[0-9a-f]{7,40}"
#: A release tag (v0.32.0, 0.14.0, v1.3.0rc21) or a commit; a branch name never matches.
_TAG = r"v?\d+(?:\.\d+)+(?:[-.]?(?:rc|post|dev|a|b)\d*)?"
_REF = rf"(?:{_SHA}|{_TAG})"
_REPO = r"https://github\.com/[\w.-]+/[\w.-]+"
_HF_REPO = r"https://huggingface\.co/[\w.-]+/[\w.-]+"

#: (form, why it is accepted). A URL must match one of these from its start.
ACCEPTED_URLS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), why)
    for pattern, why in (
        (
            rf"{_REPO}/(?:blob|tree|raw|blame)/{_REF}(?:/|$|#)",
            "a repository file or directory at a release tag or commit",
        ),
        (rf"{_REPO}/commit/{_SHA}\b", "a commit"),
        (rf"{_REPO}/compare/{_REF}\.\.\.{_REF}\b", "a diff between two pinned refs"),
        (rf"{_REPO}/releases/tag/{_TAG}$", "the release notes of a tag"),
        (
            rf"{_REPO}/(?:pull|issues|discussions)/\d+(?:$|[/#?])",
            "an issue, pull-request or discussion thread: immutable once written, and the place "
            "maintainers state facts (logs, benchmarks, decisions) that no file holds",
        ),
        (
            rf"https://raw\.githubusercontent\.com/[\w.-]+/[\w.-]+/{_REF}/",
            "a raw repository file at a release tag or commit",
        ),
        (
            rf"{_HF_REPO}/(?:blob|resolve|blame|tree|commit)/[0-9a-f]{{40}}\b",
            "a Hugging Face repository file at a commit",
        ),
        (r"https://docs\.vllm\.ai/en/v\d+\.\d+\.\d+/", "vLLM's documentation of one release"),
        (
            r"https://nvidia\.github\.io/TensorRT-LLM/\d+\.\d+\.\d+\w*/",
            "TensorRT-LLM's documentation of one release",
        ),
        (
            r"https://pypi\.org/project/[\w.-]+/\d[\w.+-]*/$",
            "a PyPI release page: what one published wheel or sdist is",
        ),
        (
            r"https://docs\.rs/crate/[\w-]+/\d+\.\d+\.\d+/",
            "a crate's published source at one version",
        ),
        (
            r"https://(?:arxiv\.org/(?:abs|pdf)/\d{4}\.\d{4,5}(?:v\d+)?"
            r"|aclanthology\.org/|proceedings\.mlr\.press/|openreview\.net/forum\?id=)",
            "a paper",
        ),
        (
            r"https://(?:datatracker\.ietf\.org/doc/html/rfc\d+|yaml\.org/spec/\d+\.\d+/)",
            "a numbered standard (RFC, a YAML spec version): fixed once published",
        ),
        (
            r"https://v\d+-\d+\.docs\.kubernetes\.io/",
            "the Kubernetes documentation of one release",
        ),
        (
            # Hardware facts (memory, bandwidth, TFLOPS, compute capability, NVLink) have one
            # primary public source: the vendor's own datasheet or spec page. Vendors publish one
            # page per product and never version it, and a product's specification does not change
            # after launch, so the page is accepted without a version. Moving documentation trees
            # (latest, nightly, main) on the same hosts are not.
            r"https://(?:[\w-]+\.)*(?:nvidia\.com|amd\.com)/(?!\S*/(?:latest|nightly|main)/)",
            "a hardware vendor's product or spec page (see the comment above)",
        ),
    )
)

#: The one exception, for the checkpoint catalog only: a checkpoint's own Hugging Face repository
#: (its page or a file at a branch) where no pinned copy of its config exists. The hub repository is
#: the publication of the checkpoint the entry describes, and the catalog README documents the
#: exception; pin these (`/blob/<commit>/`) whenever the hub can be reached to read a commit.
CATALOG_HUB_PAGE = re.compile(rf"{_HF_REPO}(?:/(?:blob|resolve)/[^/\s]+/\S*)?$")

#: Directories and files of this repository a citation may name, relative to the repository root.
REPO_DIRS = (
    "orchestrator",
    "tests",
    "docs",
    "profiles",
    "templates",
    "charts",
    "benchmarks",
    ".ci",
)

_URL = re.compile(r"https?://[^\s)\]}>'\"`,;]+")
_TRAILING = ".:"
_EXT = r"(?:py|md|sh|ya?ml|json|cpp|cu|cuh|h|hpp|rs|go|html|rst|toml|txt|jinja|j2)"
#: A file path with a directory part (`vllm/config/speculative.py`, `docs/cli.md#x`), or a
#: directory of this repository (`tests/conformance`), or a bare source file (`fused_moe.py`).
#: Bare `*.json` names are left alone: `config.json`, `tokenizer.json` name files of a checkpoint.
_PATH = re.compile(
    rf"(?<![\w/.@-])(?:\.\.\./)?[\w.*<>-]+(?:/[\w.*<>-]+)+/?(?:#[\w.-]+)?"
    rf"|(?<![\w/.@-])[\w-]+(?:\.[\w-]+)*\.{_EXT}\b(?:#[\w.-]+)?"
)
_PATH_WITH_EXT = re.compile(rf"\.{_EXT}(?:#[\w.-]+)?$")
#: Project names that look like file names.
PROJECT_NAMES = frozenset({"llama.cpp", "whisper.cpp"})
#: A bare file name that is a citation when it is not in the repository (a source file, a
#: document); bare `*.json` / `*.txt` names usually name a checkpoint's files and are left alone.
_CODE_FILE = re.compile(
    r"^[\w.-]+\.(?:py|md|sh|ya?ml|cpp|cu|cuh|h|rs|go|html|rst|toml)(?:#[\w.-]+)?$"
)
#: Citation tokens that are never accepted outside a URL, with what to do instead.
_LOOSE: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"(?<!&)#\d+\b"),
        "an issue or PR number: cite https://github.com/<owner>/<repo>/(issues|pull)/<n>",
    ),
    (
        re.compile(r"\b[\w.-]+==\d[\w.]*"),
        "a package pin: cite the file at the release tag, or https://pypi.org/project/<n>/<v>/",
    ),
    (re.compile(r"\bl\.\s?\d+"), "a line number: cite .../blob/<tag>/<path>#L<n>"),
    (re.compile(r"@[0-9a-f]{7,40}\b"), "a commit: cite .../blob/<sha>/<path> or .../commit/<sha>"),
    (re.compile(r"\bREADME\b(?!\.md)"), "a README: cite its URL at a tag or commit"),
    (
        re.compile(r"(?<![\w/.@-])(?:(?:docs|www)\.[\w-]+(?:\.[\w-]+)+|github\.com)/\S*"),
        "a web address without https://: cite the full, pinned URL",
    ),
)
#: References to the research notes that live outside the repository.
NOTE_REFERENCE = re.compile(
    r"(?<![\w/.-])(?:catalog|vllm|sglang_trtllm|peers|proposers)\.md\b"
    r"|catalog_configs\.json|feasibility_(?:vllm|k8s)\b|shared/reference"
    r"|§\s?[A-D]\d|\bcatalog §"
)


#: A fact nobody could confirm upstream is said to be so, never given an invented source.
UNVERIFIED = re.compile(r"\bnot verified upstream\b")


def url_problem(url: str, extra: tuple[re.Pattern[str], ...] = ()) -> str | None:
    """None when `url` is an accepted form (or one of `extra`), else what is wrong with it."""
    for pattern in (*(p for p, _ in ACCEPTED_URLS), *extra):
        if pattern.match(url):
            return None
    if re.match(rf"{_REPO}/(?:blob|tree|raw)/", url):
        return f"{url} names a branch: pin it to a release tag or a commit"
    return f"{url} is not pinned to a release or commit (or is not an accepted kind of source)"


def in_repo(path: str, base: Path | None) -> bool:
    """Whether `path` (file or directory, `#anchor` and `<placeholder>` allowed) exists in the
    repository, relative to its root, to the citing file's directory or to `orchestrator/`."""
    path = re.sub(r"<[^>]+>", "*", path.split("#", 1)[0]).rstrip("/")
    if not path or path.startswith(("/", "...")):
        return False
    roots = [REPO_ROOT, REPO_ROOT / "orchestrator", *([base] if base is not None else [])]
    return any(glob.glob(str(root / path)) for root in roots)


@dataclass(frozen=True)
class Scan:
    """The citations found in one text."""

    accepted: tuple[str, ...]
    problems: tuple[str, ...]


def scan(text: str, base: Path | None = None, extra: tuple[re.Pattern[str], ...] = ()) -> Scan:
    """Every citation token in `text`: accepted URLs and in-repo documents, and the problems."""
    accepted: list[str] = []
    problems: list[str] = []
    for match in NOTE_REFERENCE.finditer(text):
        problems.append(f"{match.group()!r} refers to a research note outside the repository")
    rest = text
    for match in _URL.finditer(text):
        url = match.group().rstrip(_TRAILING)
        problem = url_problem(url, extra)
        if problem:
            problems.append(problem)
        else:
            accepted.append(url)
        rest = rest.replace(match.group(), " ", 1)
    for pattern, advice in _LOOSE:
        for match in pattern.finditer(rest):
            problems.append(f"{match.group()!r} is {advice}")
    for match in _PATH.finditer(rest):
        token = match.group().rstrip(_TRAILING)
        if NOTE_REFERENCE.search(token) or token in PROJECT_NAMES:
            continue
        if in_repo(token, base):
            accepted.append(token)
        elif (
            ("/" in token and _PATH_WITH_EXT.search(token))
            or _CODE_FILE.search(token)
            or token.split("/")[0] in REPO_DIRS
        ):
            problems.append(
                f"{token!r} is a file outside the repository: cite it as a URL at a release tag "
                "or commit (https://github.com/<owner>/<repo>/blob/<tag>/<path>#L<n>)"
            )
    return Scan(tuple(accepted), tuple(problems))


def _parts(source: str) -> list[str]:
    """`source` split at `;` outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(source):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == ";" and depth <= 0:
            parts.append(source[start:i])
            start = i + 1
    return [p.strip() for p in [*parts, source[start:]] if p.strip()]


def source_problems(
    source: str, base: Path | None = None, extra: tuple[re.Pattern[str], ...] = ()
) -> list[str]:
    """What is wrong with a source a user reads: empty, a part that cites nothing a user can
    open, or any citation that is not accepted."""
    if not source.strip():
        return ["the source is empty"]
    found: list[str] = []
    for part in _parts(source):
        result = scan(part, base, extra)
        found += result.problems
        if not result.accepted and not result.problems and not UNVERIFIED.search(part):
            found.append(f"{part!r} names no URL or in-repo document a user could open")
    return found


def comment_problems(text: str, base: Path | None = None) -> list[str]:
    """What is wrong with a comment block: only its citation tokens are judged."""
    return list(scan(text, base).problems)


# ---------------------------------------------------------------------------------------------
# Where sources live
# ---------------------------------------------------------------------------------------------

#: Paths being rewritten on other branches (the bench client, the operator). The sources test
#: is applied to them once they are merged: delete the entry then.
PENDING_ELSEWHERE: tuple[str, ...] = ()

#: Packages whose module constants carry sources (engine facts, memory constants, manifests).
CONSTANT_PACKAGES = (
    "orchestrator/memory",
    "orchestrator/engines",
    "orchestrator/manifests",
    "orchestrator/deploy",
    "orchestrator/bench",
    "orchestrator/checkpoint",
    "orchestrator/compatibility",
    "orchestrator/emitters",
    "orchestrator/plan",
    "orchestrator/suggest",
)

#: Where research-note references must never appear (git-tracked text files under these).
NOTE_FREE = ("orchestrator", "benchmarks", ".ci", "charts", "templates", "docs", "README.md")


def _pending(relpath: str) -> bool:
    return relpath.startswith(PENDING_ELSEWHERE)


def rule_sources() -> Iterator[tuple[str, str]]:
    """(place, source) of every rule and stage finding."""
    from orchestrator.compatibility import all_rules
    from orchestrator.compatibility.stage_findings import STAGE_FINDINGS

    for rule in all_rules():
        yield f"rule {rule.id} ({rule.check.__module__})", rule.source
    for rule_id, finding in STAGE_FINDINGS.items():
        yield f"STAGE_FINDINGS[{rule_id!r}]", finding.source


def verdict_sources() -> Iterator[tuple[str, str]]:
    """(place, source) of every fp8 KV-cache verdict an engine gives, over every release in the
    matrix, every catalog GPU, every fp8 dtype and MLA yes / no / unknown."""
    from orchestrator.engines import ENGINES
    from orchestrator.engines.capabilities import known_versions, release_for
    from orchestrator.memory.gpus import gpu_catalog
    from orchestrator.profile.schema import KvCacheDtype

    dtypes = [d for d in get_args(KvCacheDtype) if d.startswith("fp8")]
    for name, engine in ENGINES.items():
        for version in known_versions(name):  # type: ignore[arg-type]
            release = release_for(name, version)  # type: ignore[arg-type]
            for gpu, dtype, mla in itertools.product(
                gpu_catalog().values(), dtypes, (True, False, None)
            ):
                verdict = engine.fp8_kv_cache_on(release, gpu, dtype, mla=mla)
                if verdict is not None:
                    yield f"{name}.fp8_kv_cache_on({version}, {gpu.name}, {dtype})", verdict.source


def _yaml_lines(path: Path) -> dict[str, int]:
    """First line of each distinct source value in a YAML file (to name the place)."""
    lines: dict[str, int] = {}
    for number, line in enumerate(path.read_text("utf-8").splitlines(), 1):
        for match in re.finditer(r'source: "((?:[^"\\]|\\.)*)"', line):
            lines.setdefault(json.loads(f'"{match.group(1)}"'), number)
    return lines


def capability_sources() -> Iterator[tuple[str, str]]:
    path = REPO_ROOT / "orchestrator" / "engines" / "capabilities.yaml"
    data = yaml.safe_load(path.read_text("utf-8"))
    lines = _yaml_lines(path)
    for engine, block in data.items():
        items = [(f"release {r['version']}", r) for r in block.get("releases", [])]
        items += [(f"removed_flags {r['flag']}", r) for r in block.get("removed_flags", [])]
        items += [
            (f"removed_config_keys {r['key']}", r) for r in block.get("removed_config_keys", [])
        ]
        for what, item in items:
            line = lines.get(item["source"], 0)
            yield f"capabilities.yaml:{line} {engine} {what}", item["source"]


def gpu_sources() -> Iterator[tuple[str, str]]:
    path = REPO_ROOT / "orchestrator" / "memory" / "gpus.yaml"
    data = yaml.safe_load(path.read_text("utf-8"))
    lines = _yaml_lines(path)
    for gpu, row in data.items():
        for key in ("source", "compute_capability_source"):
            if key in row:
                yield f"gpus.yaml:{lines.get(row[key], 0)} {gpu}.{key}", row[key]


def catalog_sources() -> Iterator[tuple[str, str]]:
    """(place, source) of every cited fact in the checkpoint catalog."""
    catalog = REPO_ROOT / "orchestrator" / "checkpoint" / "catalog"
    for path in sorted(catalog.glob("models/*.json")):
        for model, entry in json.loads(path.read_text("utf-8"))["models"].items():
            where = f"catalog {path.name} {model}"
            for source in entry.get("sources", ()):
                yield f"{where} sources", source
            for fact, source in entry.get("fact_sources", {}).items():
                yield f"{where} fact_sources.{fact}", source
            for item in entry.get("published_acceptance", ()):
                yield f"{where} published_acceptance", item["source"]
    families = json.loads((catalog / "tokenizers.json").read_text("utf-8"))["tokenizer_families"]
    for family, item in families.items():
        yield f"catalog tokenizers.json {family}", item["source"]


@dataclass(frozen=True)
class ConstantDoc:
    place: str
    text: str


def _constant_names(tree: ast.Module) -> dict[int, str]:
    """Line -> name of each module-level constant (UPPER_CASE, annotated or not)."""
    names: dict[int, str] = {}
    for node in tree.body:
        target = None
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            target = node.target.id
        elif (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            target = node.targets[0].id
        if target is not None and re.fullmatch(r"_?[A-Z][A-Z0-9_]*", target):
            names[node.lineno] = target
    return names


def constant_docs(path: Path) -> Iterator[ConstantDoc]:
    """The `#:` block above each module-level constant of one file."""
    lines = path.read_text("utf-8").splitlines()
    relpath = path.relative_to(REPO_ROOT).as_posix()
    for lineno, name in _constant_names(ast.parse("\n".join(lines))).items():
        block, i = [], lineno - 2
        while i >= 0 and lines[i].lstrip().startswith("#:"):
            block.insert(0, lines[i].lstrip()[2:].strip())
            i -= 1
        if block:
            yield ConstantDoc(f"{relpath}:{i + 2} ({name})", " ".join(block))


def _source_constants(path: Path) -> Iterator[tuple[str, str]]:
    """Module constants named *SOURCE* whose value is a literal source text (findings use them)."""
    tree = ast.parse(path.read_text("utf-8"))
    relpath = path.relative_to(REPO_ROOT).as_posix()
    for node in tree.body:
        if not isinstance(node, ast.AnnAssign | ast.Assign):
            continue
        target = node.target if isinstance(node, ast.AnnAssign) else node.targets[0]
        value = node.value
        if (
            isinstance(target, ast.Name)
            and "SOURCE" in target.id
            and isinstance(value, ast.Constant)
            and isinstance(value.value, str)
        ):
            yield f"{relpath}:{node.lineno} ({target.id})", value.value


def _tracked(*roots: str) -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "--", *roots], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return [p for p in out if not (REPO_ROOT / p).is_symlink() and (REPO_ROOT / p).is_file()]


def _python_files(packages: tuple[str, ...]) -> list[Path]:
    return [REPO_ROOT / p for p in _tracked(*packages) if p.endswith(".py") and not _pending(p)]


def _report(found: list[str]) -> str:
    return f"{len(found)} citation(s) a user cannot open:\n  " + "\n  ".join(found)


# ---------------------------------------------------------------------------------------------
# The checks
# ---------------------------------------------------------------------------------------------


def _check_sources(
    items: Iterator[tuple[str, str]],
    base: Path | None = None,
    extra: tuple[re.Pattern[str], ...] = (),
) -> list[str]:
    found, seen = [], set()
    for place, source in items:
        if (place.split("(")[0], source) in seen:
            continue
        seen.add((place.split("(")[0], source))
        found += [f"{place}: {problem}" for problem in source_problems(source, base, extra)]
    return found


def test_the_collectors_find_every_kind_of_source() -> None:
    """Guards the checks below against passing on nothing (a renamed key, a moved file)."""
    docs = [d for p in _python_files(CONSTANT_PACKAGES) for d in constant_docs(p)]
    assert len(list(rule_sources())) >= 40 and len(list(capability_sources())) >= 40
    assert len(list(gpu_sources())) >= 30 and len(list(catalog_sources())) >= 300
    assert len(list(verdict_sources())) > 0 and len(docs) >= 50
    assert any(place.startswith("catalog tokenizers.json") for place, _ in catalog_sources())


def test_every_rule_and_stage_finding_cites_an_openable_source() -> None:
    found = _check_sources(rule_sources())
    assert found == [], _report(found)


def test_every_engine_verdict_cites_an_openable_source() -> None:
    found = _check_sources(verdict_sources())
    assert found == [], _report(found)


def test_every_capability_matrix_source_is_openable() -> None:
    base = REPO_ROOT / "orchestrator" / "engines"
    found = _check_sources(capability_sources(), base)
    assert found == [], _report(found)


def test_every_gpu_catalog_source_is_openable() -> None:
    found = _check_sources(gpu_sources(), REPO_ROOT / "orchestrator" / "memory")
    assert found == [], _report(found)


def test_every_checkpoint_catalog_source_is_openable() -> None:
    base = REPO_ROOT / "orchestrator" / "checkpoint" / "catalog"
    found = _check_sources(catalog_sources(), base, (CATALOG_HUB_PAGE,))
    assert found == [], _report(found)


def test_every_sourced_constant_cites_openable_sources() -> None:
    found = []
    for path in _python_files(CONSTANT_PACKAGES):
        for doc in constant_docs(path):
            found += [f"{doc.place}: {p}" for p in comment_problems(doc.text, path.parent)]
        for place, source in _source_constants(path):
            found += [f"{place}: {p}" for p in source_problems(source, path.parent)]
    assert found == [], _report(found)


def test_no_research_note_is_referenced() -> None:
    found = []
    for relpath in _tracked(*NOTE_FREE):
        if _pending(relpath):
            continue
        try:
            text = (REPO_ROOT / relpath).read_text("utf-8")
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            found += [f"{relpath}:{number}: {m.group()!r}" for m in NOTE_REFERENCE.finditer(line)]
    assert found == [], "references to research notes outside the repository:\n  " + "\n  ".join(
        found
    )


# ---------------------------------------------------------------------------------------------
# The checker itself: it must refuse what users cannot open, and accept what they can
# ---------------------------------------------------------------------------------------------


class TestChecker:
    @pytest.mark.parametrize(
        "source",
        [
            "vllm.md §2.4",
            "catalog.md §A3",
            "sglang_trtllm.md B2",
            "(feasibility_k8s.md §5)",
            "shared/reference/catalog.md",
            "catalog §D1 rounds int4 to 0.52",
            "vLLM SpeculativeConfig._verify_and_get_draft_tp",
            "sglang==0.5.9 vs sglang==0.5.10 wheels: sglang/srt/server_args.py l.4861",
            "vllm-project/vllm#9995",
            "llama.cpp PR #3812",
            "DESIGN.md §3",
            "https://github.com/vllm-project/vllm/blob/main/vllm/config/speculative.py#L73",
            "https://github.com/sgl-project/sglang/tree/release/1.3.0/python",
            "https://docs.vllm.ai/en/latest/features/spec_decode.html",
            "https://docs.sglang.ai/advanced_features/speculative_decoding.html",
            "https://nvidia.github.io/TensorRT-LLM/blogs/tech_blog/blog11_GPT_OSS_Eagle3.html",
            "https://huggingface.co/Qwen/Qwen3-8B/blob/main/config.json",
            "https://docs.nvidia.com/nemo/megatron-bridge/nightly/models/qwen/qwen3-next.html",
            "https://www.baseten.co/blog/nvidia-a10-vs-a10g-for-ml-model-inference/",
            "ai-dynamo/aiconfigurator systems/l4.yaml",
            "release-notes.md @001eaec",
            "GFD README",
            "docs.nvidia.com/dynamo v1.5.0 (DGD reference)",
            "Kaito preset catalog (models pinned to Hugging Face commits)",
            "orchestrator/engines/no_such_module.py",
            "https://arxiv.org/abs/2401.15077; vllm.md §4",
            "",
        ],
    )
    def test_a_source_users_cannot_open_is_refused(self, source: str) -> None:
        assert source_problems(source) != []

    @pytest.mark.parametrize(
        "source",
        [
            "https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/config/speculative.py#L73-L83",
            "https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/speculative/"
            "eagle_utils.py#L100-L110 (the largest tree)",
            "https://github.com/NVIDIA/TensorRT-LLM/blob/7e873e54c296912df55b4c961e67079963ae4d34/"
            "1.2.0/_modules/tensorrt_llm/llmapi/llm_args.html",
            "https://github.com/ai-dynamo/aiconfigurator/blob/ee962fc/src/x.yaml#L26-L31",
            "https://github.com/vllm-project/vllm/pull/21345 (merged before v0.10.1)",
            "https://github.com/vllm-project/vllm/issues/10517#issuecomment-2489124360",
            "https://github.com/vllm-project/vllm/commit/0130080b3dec7ade06a538659d1ebb98a55f1b24",
            "https://docs.vllm.ai/en/v0.32.0/features/spec_decode.html",
            "https://nvidia.github.io/TensorRT-LLM/1.2.0/features/speculative-decoding.html",
            "https://pypi.org/project/vllm/0.10.0/",
            "https://arxiv.org/abs/2412.19437 (§5.4.3)",
            "https://www.nvidia.com/en-us/data-center/h100/",
            "https://developer.nvidia.com/cuda-gpus (compute capability 9.0)",
            "orchestrator/engines/capabilities.yaml (newest release entry per engine)",
            "the profile schema (`specdeploy schema`, profile.schema.json)",
            "orchestrator/engines/<engine>.py fp8_kv_cache_on; tests/conformance",
            "docs/engine-matrix.md#vllm",
            "https://www.nvidia.com/en-us/data-center/products/a10-gpu/; A10G bandwidth not verified upstream",
        ],
    )
    def test_a_source_users_can_open_is_accepted(self, source: str) -> None:
        assert source_problems(source) == []

    def test_a_prose_only_comment_names_no_source(self) -> None:
        assert comment_problems("How many fitting changes to report.") == []
        assert comment_problems("Seconds each API request may take (connect and each read).") == []

    def test_a_loose_citation_in_a_comment_is_named(self) -> None:
        problems = comment_problems(
            "vLLM fused_moe.py `intermediate_cache3`; aiconfigurator (catalog.md §D4); vllm#10517"
        )
        assert any("fused_moe.py" in p for p in problems)
        assert any("catalog.md" in p for p in problems)
        assert any("#10517" in p for p in problems)

    def test_a_bad_sourced_constant_is_reported_with_its_file_and_line(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        module = tmp_path / "seeded.py"
        module.write_text(
            "from typing import Final\n\n"
            "#: How many to report.\n"
            "COUNT: Final = 3\n"
            "#: Bytes per fp8 parameter (catalog.md §D1; vLLM fused_moe.py).\n"
            "FP8_BYTES: Final = 1\n"
            'FOO_SOURCE: Final = "vLLM SpeculativeConfig (vllm.md §2.4)"\n',
            "utf-8",
        )
        monkeypatch.setattr(f"{__name__}.REPO_ROOT", tmp_path)
        docs = list(constant_docs(module))
        assert [d.place for d in docs] == ["seeded.py:3 (COUNT)", "seeded.py:5 (FP8_BYTES)"]
        assert comment_problems(docs[0].text) == []
        problems = " ".join(comment_problems(docs[1].text))
        assert "'catalog.md'" in problems and "'fused_moe.py'" in problems
        [(place, source)] = list(_source_constants(module))
        assert place == "seeded.py:7 (FOO_SOURCE)" and source_problems(source) != []

    def test_a_bad_rule_source_fails_the_rule_check_naming_the_rule(self) -> None:
        seeded = iter([("rule pairing.seeded (tests)", "catalog.md §A4 (same size, other tokens)")])
        problems = _check_sources(seeded)
        assert problems and problems[0].startswith("rule pairing.seeded (tests): 'catalog.md'")
