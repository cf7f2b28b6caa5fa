"""A real `specdeploy operator` (kopf) against the loopback API server: what it applies, what
it writes to status and Events, what it refuses to touch, and what deletion leaves behind."""

from __future__ import annotations

from typing import Any

import pytest

from tests.operator.conftest import (
    CR,
    NAME,
    Operator,
    condition,
    events,
    resource,
    status_of,
    wait_for,
)
from tests.operator.fake_api import FakeCluster

pytestmark = pytest.mark.slow  # a few seconds each: a child process that starts kopf

DEPLOYMENTS = ("apis/apps/v1", "deployments")
SERVICES = ("api/v1", "services")


def argv(deployment: dict[str, Any] | None) -> list[str]:
    assert deployment is not None
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    return [*container.get("command", []), *container.get("args", [])]


def planned(api: FakeCluster, operator: Operator, generation: int = 1) -> dict[str, Any]:
    return wait_for(
        "the resource to be planned",
        lambda: (
            (s := status_of(api)).get("observedGeneration") == generation and s.get("verdict") and s
        ),
        operator,
    )


def test_a_resource_gets_its_twins_its_traffic_split_and_its_conditions(
    api: FakeCluster, operator: Operator
) -> None:
    api.put(*CR, resource(policy={"mode": "switch"}))
    status = planned(api, operator)
    uid = api.get(*CR, "default", NAME)["metadata"]["uid"]  # type: ignore[index]
    owned = {
        (o["kind"], o["metadata"]["name"]): o
        for gv in (DEPLOYMENTS, SERVICES)
        for o in api.list(*gv)
    }
    assert set(owned) == {
        ("Deployment", NAME),
        ("Deployment", f"{NAME}-baseline"),
        ("Service", NAME),
        ("Service", f"{NAME}-baseline"),
        ("Service", f"{NAME}-front"),
    }
    for obj in owned.values():
        [reference] = obj["metadata"]["ownerReferences"]
        assert reference["uid"] == uid and reference["controller"] is True
        assert reference["kind"] == "SpeculativeDeployment"
        assert {m["manager"] for m in obj["metadata"]["managedFields"]} == {"specdeploy"}
    front = owned[("Service", f"{NAME}-front")]
    assert front["spec"]["selector"] == {
        "specdeploy.io/profile": NAME,
        "specdeploy.io/variant": "speculative",
    }
    assert "ngram" in " ".join(argv(owned[("Deployment", NAME)]))
    assert "ngram" not in " ".join(argv(owned[("Deployment", f"{NAME}-baseline")]))
    assert condition(status, "Validated")["status"] == "True"
    assert "pairing.revision-pinned" in condition(status, "Validated")["message"]  # warnings named
    assert condition(status, "MemoryFits")["status"] == "True"
    assert condition(status, "Ready") == {**condition(status, "Ready"), "status": "False"}
    assert condition(status, "Speculating")["status"] == "True"
    assert status["traffic"] == {"active": "speculative", "share": "100%", "via": "Service"}
    assert [f["rule"] for f in status["findings"]] == ["pairing.revision-pinned"]
    assert wait_for("an Applied event", lambda: events(api, "Applied"), operator)

    # an update is planned again: generation 2 is observed and the twins change with it
    changed = resource(policy={"mode": "switch"})
    changed["spec"]["serving"]["max_concurrency"] = 4
    api.put(*CR, changed)
    planned(api, operator, generation=2)
    tokens = argv(api.get(*DEPLOYMENTS, "default", NAME))
    assert tokens[tokens.index("--max-num-seqs") + 1] == "4"


def test_the_ready_condition_follows_the_twins(api: FakeCluster, operator: Operator) -> None:
    api.put(*CR, resource(policy={"mode": "static", "interval_seconds": 1}))
    planned(api, operator)
    for name in (NAME, f"{NAME}-baseline"):
        api.set_status(*DEPLOYMENTS, "default", name, {"readyReplicas": 1})
    ready = wait_for(
        "Ready=True", lambda: condition(status_of(api), "Ready").get("status") == "True", operator
    )
    assert ready
    assert condition(status_of(api), "Ready")["reason"] == "TwinsReady"


def test_an_invalid_resource_gets_a_condition_and_an_event_not_a_crash_loop(
    api: FakeCluster, operator: Operator
) -> None:
    broken = resource()
    broken["spec"]["proposer"]["num_speculative_token"] = 4  # a typo
    api.put(*CR, broken)
    status = planned(api, operator)
    validated = condition(status, "Validated")
    assert validated["status"] == "False" and validated["reason"] == "Invalid"
    [finding] = status["findings"]
    assert (
        finding["rule"] == "profile.unknown-field"
        and finding["field"] == "spec.proposer.num_speculative_token"  # as kubectl edit shows it
    )
    assert "num_speculative_tokens" in finding["fix"]
    assert status["verdict"] == "Invalid"
    [event] = wait_for("a Warning event", lambda: events(api, "Invalid"), operator)
    assert event["type"] == "Warning" and "num_speculative_token" in event["message"]
    # the operator's own log says it too, not only the Event
    assert f"default/{NAME}: Invalid: 1 error(s)" in operator.output()
    assert api.list(*DEPLOYMENTS) == []
    status_patches = [r for r in api.requests if r[0] == "PATCH" and "/status" in r[1]]
    assert len(status_patches) <= 2 and operator.alive()  # handled once, not retried

    del broken["spec"]["proposer"]["num_speculative_token"]
    api.put(*CR, broken)
    status = planned(api, operator, generation=2)
    assert condition(status, "Validated")["status"] == "True"
    assert len(api.list(*DEPLOYMENTS)) == 2


def test_objects_it_does_not_own_are_left_alone(api: FakeCluster, operator: Operator) -> None:
    theirs = api.put(
        *SERVICES,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": f"{NAME}-front", "labels": {"team": "web"}},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]},
        },
    )
    api.put(*CR, resource(policy={"mode": "static", "interval_seconds": 1}))
    status = planned(api, operator)
    ready = condition(status, "Ready")
    assert ready["reason"] == "ForeignObject" and f"Service/{NAME}-front" in ready["message"]
    assert condition(status, "Speculating")["status"] == "False"
    assert wait_for("a ForeignObject event", lambda: events(api, "ForeignObject"), operator)
    after = api.get(*SERVICES, "default", f"{NAME}-front")
    assert after == theirs  # not one field changed
    assert api.get(*DEPLOYMENTS, "default", NAME) is not None  # the rest is applied

    # once theirs is gone, the condition clears on its own (no spec change) and ours is applied
    api.delete(*SERVICES, "default", f"{NAME}-front")
    ours = wait_for(
        "the front Service applied as ours",
        lambda: (
            (api.get(*SERVICES, "default", f"{NAME}-front") or {})
            .get("metadata", {})
            .get("ownerReferences")
        ),
        operator,
    )
    assert ours[0]["kind"] == "SpeculativeDeployment"
    cleared = wait_for(
        "Ready no longer ForeignObject",
        lambda: condition(status_of(api), "Ready")["reason"] != "ForeignObject" and status_of(api),
        operator,
    )
    assert condition(cleared, "Speculating")["status"] == "True"
    assert any("are gone" in e["message"] for e in events(api, "Reconciled"))


def test_what_the_plan_no_longer_has_is_pruned_and_only_that(
    api: FakeCluster, operator: Operator
) -> None:
    api.put(*CR, resource())
    planned(api, operator)
    assert api.get(*DEPLOYMENTS, "default", f"{NAME}-baseline") is not None
    without = resource(deploy={"baseline": False})
    api.put(*CR, without)
    planned(api, operator, generation=2)
    [event] = wait_for("a Pruned event", lambda: events(api, "Pruned"), operator)
    assert f"Deployment/{NAME}-baseline" in event["message"]
    assert f"Service/{NAME}-baseline" in event["message"]
    assert api.get(*DEPLOYMENTS, "default", f"{NAME}-baseline") is None  # its GPU is free
    assert api.get(*SERVICES, "default", f"{NAME}-baseline") is None
    assert api.get(*DEPLOYMENTS, "default", NAME) is not None  # the rest stays
    owned = status_of(api)["objects"]["owned"]
    refs = [{k: v for k, v in o.items() if k != "fields"} for o in owned]
    assert {"apiVersion": "apps/v1", "kind": "Deployment", "name": NAME} in refs
    assert all(o["fields"] for o in owned)  # each with the fingerprint drift is checked against
    assert all(o["name"] != f"{NAME}-baseline" for o in owned)


def test_an_owned_object_deleted_by_hand_is_recreated_within_an_interval(
    api: FakeCluster, operator: Operator
) -> None:
    api.put(*CR, resource(policy={"mode": "static", "interval_seconds": 1}))
    planned(api, operator)
    api.delete(*DEPLOYMENTS, "default", f"{NAME}-baseline")
    api.delete(*SERVICES, "default", f"{NAME}-front")
    wait_for(
        "both recreated",
        lambda: (
            api.get(*DEPLOYMENTS, "default", f"{NAME}-baseline")
            and api.get(*SERVICES, "default", f"{NAME}-front")
        ),
        operator,
    )
    [healed] = wait_for("a Reconciled event", lambda: events(api, "Reconciled"), operator)
    assert f"Deployment/{NAME}-baseline" in healed["message"] and "recreated" in healed["message"]


def test_deleting_the_resource_deletes_what_it_owns_and_nothing_else(
    api: FakeCluster, operator: Operator
) -> None:
    bystander = api.put(
        *SERVICES,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web"},
            "spec": {"ports": [{"port": 80}]},
        },
    )
    api.put(*CR, resource())
    planned(api, operator)
    assert len(api.list(*DEPLOYMENTS)) == 2
    api.delete(*CR, "default", NAME)
    wait_for("the resource to go", lambda: api.get(*CR, "default", NAME) is None, operator)
    assert api.list(*DEPLOYMENTS) == []
    assert [s["metadata"]["name"] for s in api.list(*SERVICES)] == ["web"]
    assert api.get(*SERVICES, "default", "web") == bystander


def test_a_restarted_operator_changes_nothing(api: FakeCluster, operator: Operator) -> None:
    api.put(*CR, resource())
    planned(api, operator)
    before = {
        (o["kind"], o["metadata"]["name"]): o["metadata"]["resourceVersion"]
        for o in api.list(*DEPLOYMENTS) + api.list(*SERVICES)
    }
    operator.stop()
    applies = len([r for r in api.requests if r[0] == "PATCH" and "fieldManager" in r[1]])
    operator.start()
    wait_for(
        "the resumed operator to apply again",
        lambda: (
            len([r for r in api.requests if r[0] == "PATCH" and "fieldManager" in r[1]])
            >= applies + 5
        ),
        operator,
    )
    after = {
        (o["kind"], o["metadata"]["name"]): o["metadata"]["resourceVersion"]
        for o in api.list(*DEPLOYMENTS) + api.list(*SERVICES)
    }
    assert after == before


def test_the_readiness_endpoint_answers_once_kopf_runs(api: FakeCluster, tmp_path: Any) -> None:
    """The chart's readinessProbe and livenessProbe GET kopf's liveness endpoint."""
    import socket
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    running = Operator(api, tmp_path)
    running.start("--liveness", f"http://127.0.0.1:{port}/healthz")
    try:

        def answer() -> Any:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
                    return r.status == 200 and r.read()
            except OSError:
                return None

        body = wait_for("kopf's /healthz", answer, running, timeout=30)
        assert body is not None
    finally:
        running.stop()
