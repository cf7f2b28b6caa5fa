"""Expected acceptance per proposer: a published figure for that proposer when one exists, else a
labelled prior for its method, each with its source. Never one α for every method.

A draft of k tokens is accepted position by position: `rates(k)[i]` is the chance that position
i + 1 is accepted given positions 1..i were (vLLM's per-position acceptance divided by the previous
position's). The mean acceptance length (tokens committed per verification, bonus token included,
as vLLM and SGLang report it) is then 1 + Σ_i Π_{j≤i} rates[j]. Leviathan et al. (2023) assume
one rate for every position; trained drafters that feed on their own hidden states (EAGLE-3 heads,
a reused MTP layer) lose acceptance with depth, which `decay` models (rate_i = first · decay^(i-1)).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from orchestrator.checkpoint.catalog.entries import CatalogEntry, PublishedAcceptance

Workload = Literal["code", "chat"]
WORKLOADS: Final[tuple[Workload, ...]] = ("chat", "code")
AcceptanceKind = Literal["published", "prior", "measured"]

#: Draft length the priors are anchored at when a source does not fix one.
REFERENCE_K: Final = 3


@dataclass(frozen=True)
class AcceptanceCurve:
    """Per-position conditional acceptance: rate_i = first · decay^(i-1), at most 1."""

    first: float
    decay: float = 1.0

    def rates(self, k: int) -> tuple[float, ...]:
        return tuple(min(1.0, self.first * self.decay**i) for i in range(k))

    def mean_length(self, k: int) -> float:
        """Tokens committed per verification step with a draft of k tokens (bonus included)."""
        total, reach = 1.0, 1.0
        for rate in self.rates(k):
            reach *= rate
            total += reach
        return total

    @classmethod
    def matching(cls, mean_length: float, k: int, decay: float = 1.0) -> AcceptanceCurve:
        """The curve of this shape whose mean acceptance length at `k` is `mean_length`."""
        wanted = min(max(mean_length, 1.0), k + 1.0)
        low, high = 0.0, 1.0
        for _ in range(60):  # bisection: the mean length grows with `first`
            middle = (low + high) / 2.0
            if cls(middle, decay).mean_length(k) < wanted:
                low = middle
            else:
                high = middle
        return cls((low + high) / 2.0, decay)


@dataclass(frozen=True)
class Acceptance:
    """What a proposer is expected to accept, and where that expectation comes from."""

    curve: AcceptanceCurve
    kind: AcceptanceKind
    label: str
    """One line: the figure, what it was measured on, or how the prior was formed."""
    sources: tuple[str, ...]

    def as_json(self, k: int) -> dict[str, object]:
        return {
            "kind": self.kind,
            "label": self.label,
            "sources": list(self.sources),
            "k": k,
            "mean_acceptance_length": round(self.curve.mean_length(k), 3),
            "per_position": [round(r, 4) for r in self.curve.rates(k)],
        }


@dataclass(frozen=True)
class PerPosition:
    """One public per-position acceptance measurement (share of drafts reaching each position)."""

    drafter: str
    shares: tuple[float, ...]

    def conditional(self) -> tuple[float, ...]:
        previous = (1.0, *self.shares[:-1])
        return tuple(s / p for s, p in zip(self.shares, previous, strict=True))

    def decay(self) -> float:
        rates = self.conditional()
        return float((rates[-1] / rates[0]) ** (1.0 / (len(rates) - 1)))


#: vLLM's EAGLE-3 acceptance regression baselines (MT-Bench, 80 prompts, greedy, k=3, CUDA):
#: expected_acceptance_lengths_per_pos per head.
VLLM_PER_POSITION_SOURCE: Final = (
    "https://github.com/vllm-project/vllm/blob/029ba37503c59160eacf163dd50b3bb1a6cfe982/"
    "tests/v1/spec_decode/test_acceptance_length.py#L46-L103"
)
VLLM_PER_POSITION: Final = (
    PerPosition("RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3", (0.7296, 0.5208, 0.3545)),
    PerPosition("RedHatAI/Qwen3-8B-speculator.eagle3", (0.6541, 0.3993, 0.2020)),
    PerPosition("RedHatAI/gpt-oss-20b-speculator.eagle3", (0.7165, 0.5120, 0.3337)),
)
#: Depth decay of a one-layer drafter fed its own hidden states: the median of the heads above.
SINGLE_LAYER_DECAY: Final = statistics.median(p.decay() for p in VLLM_PER_POSITION)

#: DeepSeek-V3 Technical Report §5.4.3: "the acceptance rate of the second token prediction ranges
#: between 85% and 90%" (one MTP module, k=1); the lower end is used.
MTP_FIRST_RATE: Final = 0.85
MTP_SOURCES: Final = (
    "https://arxiv.org/abs/2412.19437 (DeepSeek-V3 Technical Report, §5.4.3: second-token "
    "acceptance 85-90 %)",
    "https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/config/speculative.py#L1381-L1385 (k > 1 reruns "
    "the same MTP layer: 'may result in lower acceptance rate')",
    VLLM_PER_POSITION_SOURCE + " (depth decay of one-layer drafters)",
)


@dataclass(frozen=True)
class MethodPrior:
    """A published mean acceptance length for a method on one kind of workload."""

    value: float
    k: int
    shape_decay: float
    what: str
    source: str


#: Priors for methods whose proposers carry no figure of their own.
METHOD_PRIORS: Final[dict[tuple[str, Workload], MethodPrior]] = {
    ("draft_model", "code"): MethodPrior(
        2.8,
        3,
        1.0,
        "vLLM's regression floor for Qwen3-0.6B drafting Qwen3-1.7B on InstructCoder (greedy, "
        "k=3; a floor, not a mean)",
        "https://github.com/vllm-project/vllm/blob/0130080b3dec7ade06a538659d1ebb98a55f1b24/"
        "tests/v1/e2e/test_spec_decode.py (test_draft_model_realistic_example)",
    ),
    ("draft_model", "chat"): MethodPrior(
        2.28,
        REFERENCE_K,
        1.0,
        "Spec-Bench SpS (Vicuna-68M drafting Vicuna-7B, MT-bench and five other tasks, greedy, "
        "A100; the draft length is not fixed there, anchored at k=3)",
        "https://github.com/hemingkx/Spec-Bench/blob/09244ff33257f2cdde9422f0e382eba1f3b43a9e/"
        "Leaderboard.md",
    ),
    ("ngram", "code"): MethodPrior(
        2.96,
        5,
        1.0,
        "vLLM n-gram (prompt_lookup 2-5, k=5) on code-editing prompts (vdaita/edit_5k_char, "
        "Llama-3.1-8B-Instruct), per step including steps without a match",
        "https://github.com/vllm-project/vllm/pull/24344 (description: 'seq normalized "
        "acceptance length: 2.96')",
    ),
    ("ngram", "chat"): MethodPrior(
        1.73,
        10,
        1.0,
        "Spec-Bench PLD (prompt lookup, 10 candidate tokens, Vicuna-7B, MT-bench and five other "
        "tasks, greedy, A100)",
        "https://github.com/hemingkx/Spec-Bench/blob/09244ff33257f2cdde9422f0e382eba1f3b43a9e/"
        "Leaderboard.md; draft_num_candidate_tokens=10 in evaluation/inference_pld.py "
        "@1bc7de1312007ee77a5157f2745bc8f75d8d16be",
    ),
}

# Dataset names published acceptance lengths use, by workload (gsm8k and other maths sets count
# as neither: they are reported, never used as a stand-in).
_WORKLOAD_WORDS: Final[dict[Workload, tuple[str, ...]]] = {
    "code": ("humaneval", "livecodebench", "code"),
    "chat": ("mtbench", "mt-bench", "chat"),
}


def acceptance_for(
    method: str,
    workload: Workload,
    *,
    head: CatalogEntry | None = None,
    catalog: Iterable[CatalogEntry] = (),
) -> Acceptance | None:
    """The expected acceptance of a proposer, or None when nothing public supports a figure
    (EAGLE-1 heads without one of their own). `head` is the proposer's catalog entry; `catalog`
    the entries whose published EAGLE-3 figures form the EAGLE-3 prior."""
    if method in ("eagle", "eagle3") and head is not None:
        published = _published(head, workload)
        if published is not None:
            return published
    if method == "eagle3":
        median = _eagle3_prior(workload, catalog)
        note = _not_comparable(head)
        if median is None or not note:
            return median
        return Acceptance(median.curve, median.kind, f"{median.label}; {note}", median.sources)
    if method == "mtp":
        curve = AcceptanceCurve(MTP_FIRST_RATE, SINGLE_LAYER_DECAY)
        label = (
            f"prior: first-position acceptance {MTP_FIRST_RATE:.2f} (DeepSeek-V3 report), "
            f"decaying x{SINGLE_LAYER_DECAY:.3f} per position as vLLM measured for one-layer "
            "drafters; no published figure for this model"
        )
        return Acceptance(curve, "prior", label, MTP_SOURCES)
    prior = METHOD_PRIORS.get((method, workload))
    if prior is None:
        return None
    curve = AcceptanceCurve.matching(prior.value, prior.k, prior.shape_decay)
    label = f"prior: {prior.value:.2f} at k={prior.k}, {prior.what}"
    return Acceptance(curve, "prior", label, (prior.source,))


def usable(figure: PublishedAcceptance) -> bool:
    """A figure the chain estimate can use: its draft length is known and it was measured with a
    chain (a tree's acceptance length, e.g. SGLang topk > 1, is not comparable)."""
    settings = (figure.settings or "").lower()
    return figure.k is not None and not _is_tree(settings)


def workload_of(figure: PublishedAcceptance) -> Workload | None:
    dataset = figure.dataset.lower()
    for workload, words in _WORKLOAD_WORDS.items():
        if any(word in dataset for word in words):
            return workload
    return None


def from_measurement(rate: float) -> Acceptance:
    """A measured per-token acceptance rate (from `specdeploy bench`), the same at every position."""
    label = f"measured: acceptance rate {rate:.2f} per drafted token (given by the caller)"
    return Acceptance(AcceptanceCurve(rate), "measured", label, ())


def _published(head: CatalogEntry, workload: Workload) -> Acceptance | None:
    figures = [f for f in head.published_acceptance if usable(f)]
    matching = [f for f in figures if workload_of(f) == workload]
    chosen = matching or [f for f in figures if workload_of(f) is not None]
    if not chosen:
        return None
    figure = chosen[0]
    assert figure.k is not None  # usable() checked it
    curve = AcceptanceCurve.matching(figure.value, figure.k, SINGLE_LAYER_DECAY)
    other = "" if matching else f" (no {workload} figure published)"
    label = (
        f"published: {figure.value:.2f} at k={figure.k} on {figure.dataset} "
        f"({figure.engine}){other}"
    )
    return Acceptance(curve, "published", label, (figure.source,))


def _not_comparable(head: CatalogEntry | None) -> str:
    """What a head's own published figures are, when none can anchor a chain estimate."""
    if head is None or not head.published_acceptance:
        return ""
    figure = head.published_acceptance[0]
    why = "draft length not stated" if figure.k is None else "measured with a tree, not a chain"
    return (
        f"its own published {figure.value:.2f} ({figure.dataset}; {why}) is not comparable "
        f"({figure.source.split(' ')[0]})"
    )


def _eagle3_prior(workload: Workload, catalog: Iterable[CatalogEntry]) -> Acceptance | None:
    figures = [
        (entry, figure)
        for entry in catalog
        for figure in entry.published_acceptance
        if _is_eagle3(entry) and usable(figure) and workload_of(figure) == workload
    ]
    if not figures:
        return None
    at_reference = [_length_at(f, REFERENCE_K) for _, f in figures]
    value = statistics.median(at_reference)
    curve = AcceptanceCurve.matching(value, REFERENCE_K, SINGLE_LAYER_DECAY)
    label = (
        f"prior: median {value:.2f} at k={REFERENCE_K} of {len(figures)} published EAGLE-3 "
        f"figures on {workload} benchmarks (catalog `published_acceptance`); none for this head"
    )
    sources = tuple(sorted({f.source.split(" ")[0] for _, f in figures}))
    return Acceptance(curve, "prior", label, sources)


def _length_at(figure: PublishedAcceptance, k: int) -> float:
    assert figure.k is not None
    if figure.k == k:
        return figure.value
    return AcceptanceCurve.matching(figure.value, figure.k, SINGLE_LAYER_DECAY).mean_length(k)


def _is_eagle3(entry: CatalogEntry) -> bool:
    eagle = entry.data.get("eagle")
    generation = eagle.get("generation") if isinstance(eagle, dict) else None
    return generation != "eagle1" and "head" in entry.roles


def _is_tree(settings: str) -> bool:
    words = settings.replace(",", " ").split()
    for i, word in enumerate(words[:-1]):
        if word in ("eagle-topk", "topk") and words[i + 1].isdigit():
            return int(words[i + 1]) > 1
    return False


def describe_rates(rates: Sequence[float]) -> str:
    return ", ".join(f"{r:.2f}" for r in rates)
