"""Authentication and RBAC authorization as the API server does them, from the Roles,
ClusterRoles and bindings stored in the imitation (`--authorization-mode=Node,RBAC` in the
recording: ../shared/referees/kube-apiserver/README.md, "Authorization (RBAC)").

* Bearer tokens: the imitation's admin token (group system:masters, allowed everything), and the
  tokens it issues through the TokenRequest API (`serviceaccounts/<name>/token`) for a
  ServiceAccount (`system:serviceaccount:<namespace>:<name>`). An unknown token is 401; no token is
  `system:anonymous`, refused resources with 403 (the recording's "anonymous | 403" row).
* Verbs: get, list, watch, create, update, patch, delete, deletecollection, on `resource` or
  `resource/subresource`. A server-side apply that creates an object needs `create` besides
  `patch` (recorded: "A server-side apply that creates an object needs the `create` verb as well
  as `patch`"; the create authorization of
  https://github.com/kubernetes/kubernetes/blob/86b3ca48ea108bf601e7dac30684ca9b1308c488/staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go).
* Non-resource URLs (discovery, /version, /openapi): allowed for authenticated users
  (system:discovery), and /version, /healthz, /livez, /readyz for anyone
  (system:public-info-viewer).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

PUBLIC_PATHS = ("/version", "/healthz", "/livez", "/readyz")


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...] = ()

    @property
    def admin(self) -> bool:
        return "system:masters" in self.groups


ANONYMOUS = User("system:anonymous", ("system:unauthenticated",))


def service_account_user(namespace: str, name: str) -> User:
    return User(
        f"system:serviceaccount:{namespace}:{name}",
        ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"),
    )


@dataclass(frozen=True)
class Attributes:
    """What one request asks to do (authorizer.AttributesRecord)."""

    user: User
    verb: str
    group: str
    resource: str
    subresource: str = ""
    namespace: str = ""
    name: str = ""

    @property
    def full_resource(self) -> str:
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource


@dataclass
class Decision:
    attributes: Attributes
    allowed: bool
    via: str = ""
    """The Role or ClusterRole (kind/namespace/name) whose rule allowed it."""


@dataclass
class Authorizer:
    """RBAC over the stored Roles and bindings; `objects(kind)` lists the stored ones."""

    objects: Callable[[str], Iterable[dict[str, Any]]]
    log: list[Decision] = field(default_factory=list)

    def authorize(self, attrs: Attributes) -> Decision:
        if attrs.user.admin:
            decision = Decision(attrs, True, "system:masters")
        else:
            via = self._allowed_by(attrs)
            decision = Decision(attrs, via is not None, via or "")
        self.log.append(decision)
        return decision

    def _allowed_by(self, attrs: Attributes) -> str | None:
        for binding in self._bindings(attrs):
            ref = binding.get("roleRef") or {}
            role = self._role(ref, binding["metadata"].get("namespace", ""))
            if role is None:
                continue
            for rule in role.get("rules") or []:
                if _matches(rule, attrs):
                    meta = role["metadata"]
                    return f"{role['kind']}/{meta.get('namespace', '')}/{meta['name']}".replace(
                        "//", "/"
                    )
        return None

    def _bindings(self, attrs: Attributes) -> Iterable[dict[str, Any]]:
        for binding in self.objects("ClusterRoleBinding"):
            if _subject(binding, attrs.user):
                yield binding
        if attrs.namespace:
            for binding in self.objects("RoleBinding"):
                if binding["metadata"].get("namespace") == attrs.namespace and _subject(
                    binding, attrs.user
                ):
                    yield binding

    def _role(self, ref: dict[str, Any], namespace: str) -> dict[str, Any] | None:
        kind, name = ref.get("kind"), ref.get("name")
        for role in self.objects(str(kind)):
            meta = role["metadata"]
            if meta["name"] != name:
                continue
            if kind == "Role" and meta.get("namespace") != namespace:
                continue
            return role
        return None


def _subject(binding: dict[str, Any], user: User) -> bool:
    for subject in binding.get("subjects") or []:
        kind = subject.get("kind")
        if kind == "ServiceAccount":
            name = f"system:serviceaccount:{subject.get('namespace', '')}:{subject.get('name')}"
            if name == user.name:
                return True
        elif (kind == "User" and subject.get("name") == user.name) or (
            kind == "Group" and subject.get("name") in user.groups
        ):
            return True
    return False


def _matches(rule: dict[str, Any], attrs: Attributes) -> bool:
    groups = rule.get("apiGroups") or []
    if "*" not in groups and attrs.group not in groups:
        return False
    resources = rule.get("resources") or []
    wanted = attrs.full_resource
    if not (
        "*" in resources
        or wanted in resources
        or (attrs.subresource and f"{attrs.resource}/*" in resources)
        or (attrs.subresource and f"*/{attrs.subresource}" in resources)
    ):
        return False
    verbs = rule.get("verbs") or []
    if "*" not in verbs and attrs.verb not in verbs:
        return False
    names = rule.get("resourceNames") or []
    return not names or (bool(attrs.name) and attrs.name in names)


def forbidden_status(attrs: Attributes, kind_of_resource: str = "") -> dict[str, Any]:
    """The 403 Status of the API server's forbidden handler."""
    scope = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
    reason = (
        f'User "{attrs.user.name}" cannot {attrs.verb} resource "{attrs.full_resource}" in API '
        f'group "{attrs.group}" {scope}'
    )
    qualified = attrs.resource + (f".{attrs.group}" if attrs.group else "")
    if attrs.subresource:
        qualified = f"{qualified}"
    head = f'{qualified} "{attrs.name}" is forbidden' if attrs.name else f"{qualified} is forbidden"
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f"{head}: {reason}",
        "reason": "Forbidden",
        "details": {"name": attrs.name, "group": attrs.group, "kind": attrs.resource}
        if attrs.name
        else {"group": attrs.group, "kind": attrs.resource},
        "code": 403,
    }
