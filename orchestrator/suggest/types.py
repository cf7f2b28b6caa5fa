"""What `suggest` works on and produces: the request, the candidate proposers, the options it
ranks (each a planned, deployable profile with its figures) and the candidates it rejected."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from orchestrator.bench.acceptance import Acceptance, Workload
from orchestrator.bench.estimate import SpeedupEstimate
from orchestrator.bench.planned import NoEstimate
from orchestrator.checkpoint.catalog.entries import CatalogEntry
from orchestrator.checkpoint.info import CheckpointInfo
from orchestrator.compatibility.rule import Finding
from orchestrator.engines.names import EngineName
from orchestrator.plan.types import DeploymentPlan
from orchestrator.profile.schema import SpecMethod

Kind = Literal["mtp", "head", "draft", "ngram"]
#: Display order of the kinds (issue 12: native MTP, known heads, same-tokenizer drafts, n-gram).
KIND_ORDER: dict[Kind, int] = {"mtp": 0, "head": 1, "draft": 2, "ngram": 3}


@dataclass(frozen=True)
class SuggestRequest:
    """The command line of `specdeploy suggest`."""

    target: str
    gpu: str = "H100-80GB"
    engines: tuple[EngineName, ...] = ("vllm",)
    max_model_len: int | None = None
    """None: 8192, or less when the target supports less."""
    concurrency: int = 16
    workload: Workload = "chat"
    tensor_parallel_size: int | None = None
    """None: the smallest that holds the requested load."""
    context_tokens: int = 1024
    offline: bool = False
    base_dir: Path = field(default_factory=Path.cwd)


@dataclass(frozen=True)
class Candidate:
    """A proposer worth checking against the target."""

    kind: Kind
    method: SpecMethod
    model: str | None
    """As the profile names it: a hub id, or an absolute local directory."""
    origin: str
    """Where it was found: "built-in catalog", "user catalog", "beside the target"."""
    entry: CatalogEntry | None = None
    verifier: str | None = None
    """The model a head's publisher trained it for, when known."""
    from_user: bool = False
    """Provided by the user (beside the target or in the user catalog), not picked from ours."""

    @property
    def name(self) -> str:
        return self.model if self.model is not None else self.method

    @property
    def sources(self) -> tuple[str, ...]:
        return self.entry.sources if self.entry is not None else ()


@dataclass(frozen=True)
class Option:
    """A compatible proposer on one engine: a profile that validates, and what it costs and gains."""

    candidate: Candidate
    engine: EngineName
    plan: DeploymentPlan
    estimate: SpeedupEstimate | NoEstimate
    support: tuple[tuple[EngineName, str], ...]
    """Engines and releases of the capability matrix that support this method for this target."""
    notes: tuple[str, ...] = ()

    @property
    def num_speculative_tokens(self) -> int:
        return self.plan.profile.proposer.num_speculative_tokens

    @property
    def acceptance(self) -> Acceptance | None:
        return self.estimate.acceptance


@dataclass(frozen=True)
class Rejection:
    """A candidate that is not an option, and why (the rules' findings when they refused it)."""

    candidate: Candidate
    engines: tuple[EngineName, ...]
    reason: str
    findings: tuple[Finding, ...] = ()

    @property
    def rules(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(f.rule for f in self.findings))


@dataclass(frozen=True)
class Placement:
    """The hardware every option shares, or why the target does not fit this GPU."""

    gpu: str
    tensor_parallel_size: int | None
    max_model_len: int
    concurrency: int
    """The load the options are sized and estimated for."""
    baseline_concurrency: int | None
    """Sequences of max_model_len the target alone holds at this TP."""
    problem: str | None = None
    findings: tuple[Finding, ...] = ()


@dataclass(frozen=True)
class Suggestions:
    """Everything `suggest` found for one target."""

    request: SuggestRequest
    target: CheckpointInfo
    placement: Placement
    options: tuple[Option, ...]
    rejected: tuple[Rejection, ...]
