"""A hub (or proxy) that misbehaves (issue 16 §8): accepts connections and never answers, or
answers the reachability check and then stalls. validate finishes within the hub deadline plus
a few seconds, and checkpoint.unresolved says the hub did not answer (not "drop --offline")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.hostile.capped_cli import specdeploy
from tests.hostile.loopback_servers import answers_once_server, silent_server
from tests.support import write_profile

#: A hub id that is in no cache and not in the built-in catalog.
UNKNOWN = "acme/never-published"


def _validate_against(url: str, tmp_path: Path, deadline: str | None) -> tuple[dict, float]:
    profile = write_profile(
        tmp_path,
        target={"model": UNKNOWN},
        proposer={"method": "ngram", "num_speculative_tokens": 3},
    )
    env = {"HF_ENDPOINT": url, "HF_HUB_OFFLINE": "", "HF_HOME": str(tmp_path / "hf")}
    if deadline is not None:
        env["SPECDEPLOY_HUB_TIMEOUT"] = deadline
    run = specdeploy("validate", str(profile), "--format", "json", env=env, time_limit=60)
    assert run.returncode == 4, run.output
    (finding,) = [f for f in json.loads(run.stdout)["findings"] if f["severity"] == "error"]
    assert finding["rule"] == "checkpoint.unresolved"
    assert "drop --offline" not in finding["fix"] and "make the hub answer" in finding["fix"]
    return finding, run.seconds


@pytest.mark.parametrize(("deadline", "limit"), [(None, 30 + 5), ("3", 3 + 5)])
def test_a_silent_hub_is_given_up_on_within_the_deadline(
    tmp_path: Path, deadline: str | None, limit: float
) -> None:
    with silent_server() as url:
        finding, seconds = _validate_against(url, tmp_path, deadline)
    assert "hub: did not answer (127.0.0.1:" in finding["what"]
    assert seconds < limit  # was 397 s


def test_a_hub_that_stalls_after_the_check_is_cut_at_the_deadline(tmp_path: Path) -> None:
    with answers_once_server() as url:
        finding, seconds = _validate_against(url, tmp_path, "3")
    assert "no complete answer within 3 s" in finding["what"]
    assert seconds < 3 + 5
