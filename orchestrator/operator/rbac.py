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
    # owned objects: read to refuse foreign ones, then server-side apply (PATCH)
    ("", "services", ("get", "patch")),
    ("", "configmaps", ("get", "patch")),
    ("", "persistentvolumeclaims", ("get", "patch")),
    ("apps", "deployments", ("get", "list", "patch")),  # list: the Ready condition
    ("leaderworkerset.x-k8s.io", "leaderworkersets", ("get", "patch")),
    ("gateway.networking.k8s.io", "httproutes", ("get", "patch")),
)
