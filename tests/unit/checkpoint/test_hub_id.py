"""Hub ids for the user catalog: accepted and refused as huggingface_hub's validate_repo_id does."""

from __future__ import annotations

import pytest
from huggingface_hub.errors import HFValidationError
from huggingface_hub.utils import validate_repo_id

from orchestrator.checkpoint.catalog.hub_id import hub_id_problem

ACCEPTED = [
    "Qwen/Qwen3-8B",
    "meta-llama/Llama-3.1-8B-Instruct",
    "a/b",
    "my_org/model.v2",
    "x" * 96 + "/" + "y" * 96,
    "acme/_private",
]
REFUSED = [
    "a/..",
    "a/.",
    "../a",
    "a/b..c",
    "a/b--c",
    "a/-b",
    "a/b-",
    "a/.b",
    "a/b.",
    "a/b.git",
    "a/" + "x" * 97,
    "a/" + "x" * 300,
    "x" * 97 + "/b",
    "a/b c",
    "a/b$(id)",
    "a/café",
    "a/b\n",
    "a\\b/c",
]


@pytest.mark.parametrize("name", ACCEPTED)
def test_the_hub_accepts_these_and_so_does_the_catalog(name: str) -> None:
    validate_repo_id(name)  # the referee: the hub client's own check
    assert hub_id_problem(name) is None


@pytest.mark.parametrize("name", REFUSED)
def test_the_hub_refuses_these_and_so_does_the_catalog(name: str) -> None:
    with pytest.raises(HFValidationError):
        validate_repo_id(name)
    problem = hub_id_problem(name)
    assert problem is not None and len(problem) < 200


@pytest.mark.parametrize("name", ["qwen3", "a/b/c", "/b", "a/", ""])
def test_the_catalog_also_needs_exactly_one_namespace(name: str) -> None:
    assert hub_id_problem(name) is not None


def test_a_long_part_is_named_by_its_length_not_printed_whole() -> None:
    problem = hub_id_problem("a/" + "x" * 300)
    assert problem is not None and "300 characters" in problem and "x" * 60 not in problem
