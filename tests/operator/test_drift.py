"""Drift on owned objects (orchestrator/operator/drift.py): specdeploy's Apply entry in
managedFields, its fingerprint, and what a forced apply took back from whom. The entries below are
in the shape the API server reports them (FieldsV1 tries, keyed list items marked by ".")."""

from __future__ import annotations

from typing import Any

from orchestrator.operator import drift

ENGINE = 'k:{"name":"engine"}'
CONTAINER: dict[str, Any] = {".": {}, "f:name": {}, "f:image": {}, "f:args": {}}
OURS: dict[str, Any] = {
    "f:metadata": {"f:labels": {"f:app": {}}},
    "f:spec": {
        "f:replicas": {},
        "f:template": {"f:spec": {"f:containers": {ENGINE: CONTAINER}}},
    },
}


def entry(manager: str, fields: dict[str, Any], operation: str = "Apply", **extra: str) -> Any:
    return {
        "manager": manager,
        "operation": operation,
        "apiVersion": "apps/v1",
        "time": "2026-12-01T10:00:00Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
        **extra,
    }


def deployment(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "d", "managedFields": list(entries)}}


def without(fields: dict[str, Any], *path: str) -> dict[str, Any]:
    """A copy of a FieldsV1 trie without the leaf at `path`."""
    if len(path) == 1:
        return {k: v for k, v in fields.items() if k != path[0]}
    return {**fields, path[0]: without(fields[path[0]], *path[1:])}


CONTROLLER = entry(
    "kube-controller-manager",
    {"f:status": {"f:replicas": {}}},
    operation="Update",
    subresource="status",
)


class TestAppliedFields:
    def test_only_specdeploys_apply_entry_on_the_object_itself_counts(self) -> None:
        live = deployment(
            entry("specdeploy", {"f:data": {}}, operation="Update"),
            entry("specdeploy", {"f:status": {}}, subresource="status"),
            entry("kubectl", {"f:spec": {}}),
            entry("specdeploy", OURS),
        )
        assert drift.applied_fields(live) == OURS

    def test_an_object_specdeploy_never_applied_has_none(self) -> None:
        assert drift.applied_fields(deployment(entry("kubectl", OURS))) is None
        assert drift.applied_fields({"metadata": {}}) is None
        assert drift.fingerprint({"metadata": {}}) == ""


class TestFingerprint:
    def test_it_ignores_the_time_and_other_managers(self) -> None:
        first = deployment(entry("specdeploy", OURS), CONTROLLER)
        later = deployment(
            {**entry("specdeploy", OURS), "time": "2026-12-02T00:00:00Z"},
            entry("kube-controller-manager", {"f:metadata": {"f:annotations": {}}}, "Update"),
        )
        assert drift.fingerprint(first) == drift.fingerprint(later)
        assert len(drift.fingerprint(first)) == drift.FINGERPRINT_CHARS

    def test_a_field_lost_to_kubectl_scale_changes_it(self) -> None:
        applied = deployment(entry("specdeploy", OURS))
        recorded = drift.fingerprint(applied)
        scaled = deployment(
            entry("specdeploy", without(OURS, "f:spec", "f:replicas")),
            entry("kubectl", {"f:spec": {"f:replicas": {}}}, "Update", subresource="scale"),
        )
        assert drift.drifted(scaled, recorded)
        assert not drift.drifted(applied, recorded)

    def test_nothing_recorded_is_no_drift(self) -> None:
        assert not drift.drifted(deployment(entry("kubectl", OURS)), None)
        assert not drift.drifted(deployment(entry("kubectl", OURS)), "")


class TestTakenBack:
    def test_each_field_is_named_as_the_api_server_prints_it_with_who_had_it(self) -> None:
        edited = without(OURS, "f:spec", "f:template", "f:spec", "f:containers", ENGINE, "f:args")
        before = deployment(
            entry("specdeploy", without(edited, "f:spec", "f:replicas")),
            entry("kubectl", {"f:spec": {"f:replicas": {}}}, "Update", subresource="scale"),
            entry(
                "kubectl-edit",
                {"f:spec": {"f:template": {"f:spec": {"f:containers": {ENGINE: {"f:args": {}}}}}}},
                "Update",
            ),
            CONTROLLER,
        )
        after = deployment(entry("specdeploy", OURS), CONTROLLER)
        assert drift.taken_back(before, after) == [
            ".spec.replicas (kubectl via scale)",
            '.spec.template.spec.containers[name="engine"].args (kubectl-edit)',
        ]

    def test_a_field_nobody_has_any_more_was_removed(self) -> None:
        before = deployment(entry("specdeploy", without(OURS, "f:metadata", "f:labels", "f:app")))
        after = deployment(entry("specdeploy", OURS))
        assert drift.taken_back(before, after) == [".metadata.labels.app (removed)"]

    def test_a_list_item_taken_whole_is_named_by_its_fields(self) -> None:
        ports = {'k:{"port":8000,"protocol":"TCP"}': {".": {}, "f:port": {}, "f:targetPort": {}}}
        before = deployment(entry("specdeploy", {"f:spec": {}}))
        after = deployment(entry("specdeploy", {"f:spec": {"f:ports": ports}}))
        assert drift.taken_back(before, after) == [
            '.spec.ports[port=8000,protocol="TCP"].port (removed)',
            '.spec.ports[port=8000,protocol="TCP"].targetPort (removed)',
        ]

    def test_nothing_taken_back_when_nothing_was_lost(self) -> None:
        live = deployment(entry("specdeploy", OURS))
        assert drift.taken_back(live, live) == []


class TestDescribe:
    def test_objects_and_their_fields_with_a_cap(self) -> None:
        many = [f".data.k{i} (removed)" for i in range(drift.MAX_FIELDS_SHOWN + 3)]
        text = drift.describe({"Deployment/d": [".spec.replicas (kubectl)"], "ConfigMap/c": many})
        assert text.startswith("Deployment/d: .spec.replicas (kubectl); ConfigMap/c: .data.k0")
        assert text.endswith("and 3 more")


class TestPrinted:
    def test_set_items_and_indices(self) -> None:
        assert drift.printed(("f:spec", "f:finalizers", 'v:"a"')) == '.spec.finalizers[="a"]'
        assert drift.printed(("f:items", "i:2")) == ".items[2]"
