"""The control loop end to end, fast: a real operator scrapes two loopback /metrics endpoints
(pods at 127.0.0.2 and 127.0.0.3, as a kubelet would report them) whose counters the test
drives, and moves the traffic split. The real-vLLM scenario is tests/e2e/test_operator_vllm.py;
RBAC: every request the operator made here is allowed by the chart's rules."""

from __future__ import annotations

import time
from typing import Any

import pytest
import yaml

from orchestrator.operator.crd import custom_resource_definition
from orchestrator.operator.rbac import LEADER_RULES, RULES
from tests.operator.conftest import (
    CR,
    NAME,
    Operator,
    ScriptedTwin,
    add_pods,
    events,
    helm_run,
    resource,
    status_of,
    wait_for,
)
from tests.operator.fake_api import FakeCluster
from tests.support import REPO_ROOT

pytestmark = pytest.mark.slow


def test_switch_moves_the_front_service_and_says_why(
    api: FakeCluster, operator: Operator, twins: dict[str, ScriptedTwin]
) -> None:
    port = twins["speculative"].server.server_address[1]
    policy = {
        "mode": "switch",
        "interval_seconds": 1,
        "dwell_seconds": 4,
        "hysteresis": 0.1,
        "smoothing": 1.0,
    }
    api.put(*CR, resource(policy=policy, serving={"port": port}))
    wait_for("the twins", lambda: len(api.list("apis/apps/v1", "deployments")) == 2, operator)
    add_pods(api)

    twins["speculative"].per_token_s, twins["baseline"].per_token_s = (
        0.010,
        0.020,
    )  # speculation wins
    wait_for(
        "a decision",
        lambda: status_of(api).get("lastDecision", {}).get("reason") == "Winning",
        operator,
    )
    assert selector(api) == "speculative"

    twins["speculative"].per_token_s = 0.050  # above the crossover
    for twin in twins.values():
        twin.load = 6.0
    # The Service is patched before the status records the decision: wait for both.
    wait_for(
        "traffic on the baseline, and its decision recorded",
        lambda: selector(api) == "baseline" and len(status_of(api).get("decisions", [])) == 1,
        operator,
        timeout=30,
    )
    status = status_of(api)
    [decision] = status["decisions"]
    assert decision["reason"] == "BaselineWins" and decision["evidence"]["load"] == "5-8"
    measured = decision["evidence"]
    assert measured["baseline"]["smoothedLatencyPerTokenMs"] == pytest.approx(20.0)
    assert (
        measured["speculative"]["smoothedLatencyPerTokenMs"] > 20.0 / 0.9
    )  # beyond the hysteresis
    assert measured["latencyRatio"] == pytest.approx(
        20.0 / measured["speculative"]["smoothedLatencyPerTokenMs"], abs=1e-3
    )
    assert status["traffic"]["active"] == "baseline" and status["verdict"] == "BaselineServes"
    speculating = next(c for c in status["conditions"] if c["type"] == "Speculating")
    assert speculating["status"] == "False" and speculating["reason"] == "BaselineWins"
    [event] = wait_for("a Switched event", lambda: events(api, "Switched"), operator)
    assert f"{measured['speculative']['smoothedLatencyPerTokenMs']:.1f} ms" in event["message"]

    twins["speculative"].per_token_s = 0.010
    for twin in twins.values():
        twin.load = 1.0
    wait_for(
        "traffic back on the speculative twin, and its decision recorded",
        lambda: selector(api) == "speculative" and len(status_of(api).get("decisions", [])) == 2,
        operator,
        timeout=30,
    )
    first, second = status_of(api)["decisions"]
    assert second["at"] - first["at"] >= 4  # dwell
    assert second["reason"] == "SpeculationWins"

    used = requests_as_rbac(api)
    assert {
        ("", "pods", "list"),
        ("", "events", "create"),
        ("specdeploy.io", "speculativedeployments", "watch"),
        ("specdeploy.io", "speculativedeployments/status", "patch"),
        ("", "services", "patch"),
    } <= used
    allowed = {(group, resource, verb) for group, resource, verbs in RULES for verb in verbs}
    assert used <= allowed, f"not granted: {sorted(used - allowed)}"


def test_an_idle_twin_is_explored_with_half_the_pods_never_with_all_traffic(
    api: FakeCluster, operator: Operator, twins: dict[str, ScriptedTwin]
) -> None:
    """No mirror: the baseline twin gets no request while the front Service selects the
    speculative twin. With policy.explore_percent 50 the front Service selects both twins' pods
    (half the traffic each) until the baseline is timed at the same load; it is faster there, so
    traffic moves. At no point does the Service select the baseline's pods alone before that."""
    port = twins["speculative"].server.server_address[1]
    policy = {
        "mode": "switch",
        "interval_seconds": 1,
        "dwell_seconds": 2,
        "hysteresis": 0.1,
        "smoothing": 1.0,
        "explore_percent": 50,
    }
    twins["baseline"].paused = True
    api.put(*CR, resource(policy=policy, serving={"port": port}))
    wait_for("the twins", lambda: len(api.list("apis/apps/v1", "deployments")) == 2, operator)
    add_pods(api)
    twins["speculative"].per_token_s = 0.050
    seen: list[str | None] = []

    def exploring() -> bool:
        seen.append(selector(api))
        return seen[-1] is None and status_of(api).get("traffic", {}).get("exploring") is not None

    wait_for("the front Service on both twins' pods", exploring, operator, timeout=30)
    assert "baseline" not in seen
    assert status_of(api)["traffic"] == {
        "active": "speculative",
        "share": "50%",
        "via": "Service",
        "exploring": "50% to the baseline twin",
    }
    [event] = wait_for("an Exploring event", lambda: events(api, "Exploring"), operator)
    assert "50% of the traffic" in event["message"]
    # now routed to, and faster
    twins["baseline"].per_token_s, twins["baseline"].paused = 0.010, False
    # The Service is patched before the status records the decision: wait for both.
    wait_for(
        "traffic on the baseline twin, and its decision recorded",
        lambda: (
            selector(api) == "baseline"
            and (status_of(api).get("lastDecision") or {}).get("reason") == "BaselineWins"
        ),
        operator,
        timeout=30,
    )
    decisions = status_of(api)["decisions"]
    assert [d["reason"] for d in decisions][-2:] == ["Exploring", "BaselineWins"]
    assert "exploring" not in status_of(api)["traffic"]


def test_failover_within_an_interval_and_both_down_holds_with_events(
    api: FakeCluster, operator: Operator, twins: dict[str, ScriptedTwin]
) -> None:
    port = twins["speculative"].server.server_address[1]
    policy = {"mode": "switch", "interval_seconds": 1, "dwell_seconds": 600, "smoothing": 1.0}
    api.put(*CR, resource(policy=policy, serving={"port": port}))
    wait_for("the twins", lambda: len(api.list("apis/apps/v1", "deployments")) == 2, operator)
    add_pods(api)
    twins["speculative"].per_token_s, twins["baseline"].per_token_s = 0.010, 0.020
    wait_for(
        "speculation winning",
        lambda: status_of(api).get("lastDecision", {}).get("reason") == "Winning",
        operator,
    )

    def down(variant: str) -> None:  # its pod stops answering: connections are refused
        twins[variant].server.shutdown()
        twins[variant].server.server_close()

    down("speculative")
    # a 600 s dwell does not hold a failover: health comes before speed
    wait_for("traffic on the baseline", lambda: selector(api) == "baseline", operator, timeout=15)
    [failover] = wait_for("the failover event", lambda: events(api, "ActiveUnhealthy"), operator)
    assert failover["type"] == "Warning" and "speculative twin" in failover["message"]
    [unhealthy] = events(api, "TwinUnhealthy")
    assert unhealthy["type"] == "Warning" and "speculative" in unhealthy["message"]
    # the Event is posted before the status patch lands: wait for the decision too
    decisions = wait_for(
        "the failover decision in status", lambda: status_of(api).get("decisions"), operator
    )
    assert decisions[-1]["reason"] == "ActiveUnhealthy"

    down("baseline")
    [both] = wait_for("the both-down event", lambda: events(api, "NoTwinAnswers"), operator)
    assert both["type"] == "Warning" and "stays on the baseline twin" in both["message"]
    time.sleep(3)  # holds: no flapping to a twin that does not answer either, no repeated Events
    assert selector(api) == "baseline" and len(events(api, "NoTwinAnswers")) == 1


def test_the_chart_lints_and_renders_both_scopes(helm: list[str]) -> None:
    chart = str(REPO_ROOT / "charts" / "specdeploy-operator")
    helm_run(helm, "lint", "--strict", chart)
    namespaced = [
        d
        for d in yaml.safe_load_all(
            helm_run(helm, "template", "t", chart, "--set", "watchNamespaces={a,b}")
        )
        if d
    ]
    assert sorted((d["kind"], d["metadata"].get("namespace")) for d in namespaced if d["kind"].startswith("Role")) == [
        ("Role", "a"), ("Role", "b"), ("Role", "default"),  # default: the Lease's (release) one
        ("RoleBinding", "a"), ("RoleBinding", "b"), ("RoleBinding", "default"),
    ]  # fmt: skip
    [deployment] = [d for d in namespaced if d["kind"] == "Deployment"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["args"] == [
        "--namespace=a", "--namespace=b", "--leader-elect", "--lease-seconds=15",
        "--metrics-bind=0.0.0.0:8081",
    ]  # fmt: skip
    assert deployment["spec"]["strategy"]["type"] == "RollingUpdate"  # the Lease hands over
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    alone = [
        d
        for d in yaml.safe_load_all(
            helm_run(helm, "template", "t", chart, "--set", "leaderElection.enabled=false")
        )
        if d
    ]
    [deployment] = [d for d in alone if d["kind"] == "Deployment"]
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    assert "--leader-elect" not in deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert [d["metadata"]["name"] for d in alone if d["kind"] == "Role"] == [
        "t-specdeploy-operator"
    ]
    # ready once kopf answers its liveness endpoint (tests/operator/test_operator.py runs it)
    assert container["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert "http://0.0.0.0:8080/healthz" in container["command"]
    clusterwide = [
        d
        for d in yaml.safe_load_all(
            helm_run(helm, "template", "t", chart, "--set", "allNamespaces=true")
        )
        if d
    ]
    assert {d["kind"] for d in clusterwide} == {
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",  # the Lease's, in the release namespace
        "RoleBinding",
        "Deployment",
        "CustomResourceDefinition",  # a template: `helm upgrade` updates it
    }
    [crd] = [d for d in clusterwide if d["kind"] == "CustomResourceDefinition"]
    assert crd == custom_resource_definition()  # what --print-crd prints, kept on uninstall
    assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    left_to_an_admin = helm_run(helm, "template", "t", chart, "--set", "crd.install=false")
    assert "CustomResourceDefinition" not in left_to_an_admin


def test_the_chart_grants_exactly_the_operators_rules(helm: list[str]) -> None:
    rendered = helm_run(helm, "template", "t", str(REPO_ROOT / "charts" / "specdeploy-operator"))
    roles = {
        d["metadata"]["name"]: d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "Role"
    }
    assert set(roles) == {"t-specdeploy-operator", "t-specdeploy-operator-leader"}

    def granted(role: dict[str, Any]) -> set[tuple[str, str, str]]:
        return {
            (g, r, v)
            for rule in role["rules"]
            for g in rule["apiGroups"]
            for r in rule["resources"]
            for v in rule["verbs"]
        }

    declared = {(g, r, v) for g, r, verbs in RULES for v in verbs}
    assert granted(roles["t-specdeploy-operator"]) == declared
    leader = {(g, r, v) for g, r, verbs in LEADER_RULES for v in verbs}
    assert granted(roles["t-specdeploy-operator-leader"]) == leader


def test_every_rule_is_needed() -> None:
    """Each granted resource is one the operator reads, applies or watches (objects.KINDS and the
    loop): no wildcard, no secrets, and delete only on what it applies (pruning; garbage
    collection deletes the rest when the resource goes)."""
    from orchestrator.operator.objects import KINDS

    applied = {(_group(k.api_version), _plural(k.kind)) for k in KINDS}
    for group, name, verbs in RULES:
        assert "*" not in verbs and "*" not in name and "secrets" not in name
        assert "delete" not in verbs or (group, name) in applied, (group, name)
        if "patch" in verbs and group != "specdeploy.io":
            assert (group, name) in applied
    assert {(_group(k.api_version), _plural(k.kind)) for k in KINDS} <= {
        (g, r) for g, r, _ in RULES
    }


def selector(api: FakeCluster) -> str | None:
    front = api.get("api/v1", "services", "default", f"{NAME}-front")
    return None if front is None else front["spec"]["selector"].get("specdeploy.io/variant")


def requests_as_rbac(api: FakeCluster) -> set[tuple[str, str, str]]:
    """(api group, resource, verb) of each request the operator made (discovery excluded)."""
    from urllib.parse import parse_qs, urlsplit

    from tests.operator.fake_api import _PATH

    used = set()
    for method, path, _ in api.requests:  # the test itself writes to the store, not over HTTP
        parts = urlsplit(path)
        match = _PATH.match(parts.path)
        if match is None:
            continue
        group = "" if match["gv"] == "api/v1" else match["gv"].split("/")[1]
        resource = match["plural"] + (f"/{match['sub']}" if match["sub"] else "")
        query = parse_qs(parts.query)
        verb = {
            "GET": "get",
            "PATCH": "patch",
            "POST": "create",
            "DELETE": "delete",
            "PUT": "update",
        }[method]
        if method == "GET" and not match["name"]:
            verb = "watch" if query.get("watch") == ["true"] else "list"
        used.add((group, resource, verb))
    return used


def _group(api_version: str) -> str:
    return api_version.split("/")[0] if "/" in api_version else ""


def _plural(kind: str) -> str:
    return {"PersistentVolumeClaim": "persistentvolumeclaims"}.get(kind, kind.lower() + "s")
