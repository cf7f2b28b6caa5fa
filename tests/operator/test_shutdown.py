"""What a pod's operator process does on its own: it logs what it does without --debug, and
SIGTERM stops it at once, as a pod's termination needs.

kopf 1.x, stopped by a signal, leaves the task that waits for an operator's stop flag pending and
waits 5 s for it before the process exits (kopf/_core/reactor/running.py, `run_tasks`); the
operator raises its flag as kopf cleans up (orchestrator/operator/run.py). Measured here: 5.2 s
before, 0.2 s after. The bound below is far from both.
"""

from __future__ import annotations

import time
from pathlib import Path

from tests.operator.conftest import CR, Operator, resource, status_of, wait_for
from tests.operator.fake_api import FakeCluster


def test_sigterm_stops_the_operator_without_kopfs_five_second_wait(
    api: FakeCluster, tmp_path: Path
) -> None:
    operator = Operator(api, tmp_path)
    operator.start()
    try:
        api.put(*CR, resource(policy={"mode": "static"}))
        wait_for("the resource to be planned", lambda: status_of(api).get("verdict"), operator)
    finally:
        began = time.monotonic()
        operator.stop()
        took = time.monotonic() - began
    assert took < 3.0, f"the operator took {took:.1f} s to stop on SIGTERM"
    assert "Hung tasks stopping is skipped" in operator.output()


def test_without_debug_its_log_says_what_it_did_and_not_kopf_s_chatter(
    api: FakeCluster, tmp_path: Path
) -> None:
    operator = Operator(api, tmp_path)
    operator.start(debug=False)
    try:
        api.put(*CR, resource(policy={"mode": "static"}))
        wait_for("the resource to be planned", lambda: status_of(api).get("verdict"), operator)
        wait_for("its Applied line", lambda: ": Applied: applied" in operator.output(), operator)
    finally:
        operator.stop()
    log = operator.output()
    assert "INFO specdeploy.operator: default/" in log  # a Normal Event, in the log too
    assert "DEBUG" not in log and "INFO kopf" not in log, log[-2000:]
