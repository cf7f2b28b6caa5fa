"""The permissions the operator uses, and no more: the rules of the operator chart's Role (or
ClusterRole with allNamespaces). Tests keep the chart equal to `RULES` and check that every
request the operator makes is allowed by them and every rule is used.

(api group, resource, verbs), one line per use:
"""

from __future__ import annotations

from typing import Final

RULES: Final[tuple[tuple[str, str, tuple[str, ...]], ...]] = (
    # kopf lists and watches resources, patches its annotations and finalizer
    ("specdeploy.io", "speculativedeployments", ("get", "list", "watch", "patch")),
    # conditions, decisions and the loop's memory
    ("specdeploy.io", "speculativedeployments/status", ("patch",)),
    # ownerReferences with blockOwnerDeletion need it (OwnerReferencesPermissionEnforcement,
    # https://kubernetes.io/docs/reference/access-authn-authz/admission-controllers/#ownerreferencespermissionenforcement)
    ("specdeploy.io", "speculativedeployments/finalizers", ("update",)),
    ("", "events", ("create",)),  # Events on the resource
    ("", "pods", ("list",)),  # the twins' pods, to scrape /metrics
    # owned objects: read to refuse foreign ones, then server-side apply (PATCH). An apply that
    # creates the object is authorized as `create` too: a Role with get/patch only gets 403
    # "cannot create resource" on the first apply (createAuthorizerAttributes in
    # https://github.com/kubernetes/kubernetes/blob/v1.36.0/staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go)
    # delete: pruning what the plan no longer has (after `deploy.baseline: false`, the baseline
    # twin), each object only while it is owned by the resource and has the uid it had.
    ("", "services", ("get", "create", "patch", "delete")),
    ("", "configmaps", ("get", "create", "patch", "delete")),
    ("", "persistentvolumeclaims", ("get", "create", "patch", "delete")),
    ("apps", "deployments", ("get", "list", "create", "patch", "delete")),  # list: Ready
    ("leaderworkerset.x-k8s.io", "leaderworkersets", ("get", "create", "patch", "delete")),
    ("gateway.networking.k8s.io", "httproutes", ("get", "create", "patch", "delete")),
)

#: The Role in the operator's own namespace when leader election is on (orchestrator/operator/
#: leader.py): read the Lease, create it when absent, renew or take it over (a replace: update).
LEADER_RULES: Final[tuple[tuple[str, str, tuple[str, ...]], ...]] = (
    ("coordination.k8s.io", "leases", ("get", "create", "update")),
)
