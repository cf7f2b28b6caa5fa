"""What the API server itself checks and fills in on the built-in kinds specdeploy applies, beyond
their schema: defaults (apps/v1 and core/v1 SetDefaults_*), and the value validation of
pkg/apis/core/validation and pkg/apis/apps/validation that a profile can reach (names and
namespaces, labels, replicas, ports, containers, quantities, a Deployment's selector).

Sources, kubernetes/kubernetes at the 1.36 line's commit the file index holds:
https://github.com/kubernetes/kubernetes/blob/03014f486c86dbe8a7fbe275fe14250854aab219/staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go
(DNS-1123 and DNS-1035 names, qualified names, label values and their messages),
pkg/apis/core/v1/defaults.go and pkg/apis/apps/v1/defaults.go (the defaults). Anything else the
real validation checks is not imitated: an object that passes here may still be refused there, and
that is what the e2e suite against a real cluster (SPECDEPLOY_E2E_KUBECONFIG) is for.
"""

from __future__ import annotations

import re
from typing import Any

from tests.kube.fields import BadQuantity, parse_quantity
from tests.kube.schema import FieldError, invalid, required

_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_QUALIFIED = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")

LABEL_MESSAGE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
DNS1035_MESSAGE = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
    "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)
#: Kinds whose names are DNS-1035 labels (Services) or DNS-1123 labels (Namespaces); every other
#: kind here takes a DNS-1123 subdomain (ValidateObjectMeta's name validators).
_NAME_RULES = {"Service": "dns1035", "Namespace": "label"}


def dns_label_errors(field: str, value: str) -> list[FieldError]:
    """IsDNS1123Label: at most 63 characters, lower-case alphanumerics and '-'."""
    out = []
    if len(value) > 63:
        out.append(invalid(field, value, "must be no more than 63 characters"))
    if not _LABEL.match(value):
        out.append(invalid(field, value, LABEL_MESSAGE))
    return out


def subdomain_errors(field: str, value: str) -> list[FieldError]:
    out = []
    if len(value) > 253:
        out.append(invalid(field, value, "must be no more than 253 characters"))
    if not _SUBDOMAIN.match(value):
        out.append(invalid(field, value, SUBDOMAIN_MESSAGE))
    return out


def _dns1035_errors(field: str, value: str) -> list[FieldError]:
    out = []
    if len(value) > 63:
        out.append(invalid(field, value, "must be no more than 63 characters"))
    if not _DNS1035.match(value):
        out.append(invalid(field, value, DNS1035_MESSAGE))
    return out


def name_errors(kind: str, name: str) -> list[FieldError]:
    rule = _NAME_RULES.get(kind, "subdomain")
    if rule == "dns1035":
        return _dns1035_errors("metadata.name", name)
    if rule == "label":
        return dns_label_errors("metadata.name", name)
    return subdomain_errors("metadata.name", name)


def _qualified_name_errors(field: str, key: str) -> list[FieldError]:
    prefix, _, name = key.rpartition("/")
    out = []
    if prefix:
        out += [
            invalid(field, key, f"prefix part {e.body.split(': ', 2)[-1]}")
            for e in subdomain_errors(field, prefix)
        ]
    if not name:
        out.append(invalid(field, key, "name part must be non-empty"))
    elif len(name) > 63:
        out.append(invalid(field, key, "name part must be no more than 63 characters"))
    elif not _QUALIFIED.match(name):
        out.append(
            invalid(
                field,
                key,
                "name part must consist of alphanumeric characters, '-', '_' or '.', and must "
                "start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
                "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            )
        )
    return out


def label_errors(field: str, labels: Any) -> list[FieldError]:
    out: list[FieldError] = []
    if not isinstance(labels, dict):
        return out
    for key, value in labels.items():
        out += _qualified_name_errors(field, str(key))
        text = "" if value is None else str(value)
        if len(text) > 63:
            out.append(invalid(field, text, "must be no more than 63 characters"))
        if not _LABEL_VALUE.match(text):
            out.append(
                invalid(
                    field,
                    text,
                    "a valid label must be an empty string or consist of alphanumeric characters, "
                    "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. "
                    "'MyValue',  or 'my_value',  or '12345', regex used for validation is "
                    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
                )
            )
    return out


def builtin_errors(obj: dict[str, Any]) -> list[FieldError]:
    """The value checks of one built-in object, in the order the validation functions run."""
    kind = str(obj.get("kind"))
    meta = obj.get("metadata") or {}
    out: list[FieldError] = []
    name = meta.get("name")
    if not name:
        out.append(required("metadata.name"))
    else:
        out += name_errors(kind, str(name))
    out += label_errors("metadata.labels", meta.get("labels"))
    annotations = meta.get("annotations") or {}
    for key in annotations:
        out += _qualified_name_errors("metadata.annotations", str(key))
    size = sum(len(str(k)) + len(str(v)) for k, v in annotations.items())
    if size > 262144:
        out.append(
            FieldError(
                "FieldValueTooLong",
                "metadata.annotations",
                "Too long: may not be more than 262144 bytes",
            )
        )
    check = _KIND_CHECKS.get(kind)
    if check is not None:
        out += check(obj)
    return out


def _deployment(obj: dict[str, Any]) -> list[FieldError]:
    spec = obj.get("spec") or {}
    out: list[FieldError] = []
    replicas = spec.get("replicas")
    if isinstance(replicas, int) and replicas < 0:
        out.append(invalid("spec.replicas", replicas, "must be greater than or equal to 0"))
    selector = (spec.get("selector") or {}).get("matchLabels")
    if not spec.get("selector"):
        out.append(required("spec.selector"))
    template = spec.get("template") or {}
    labels = (template.get("metadata") or {}).get("labels") or {}
    out += label_errors("spec.template.metadata.labels", labels)
    if isinstance(selector, dict) and any(labels.get(k) != v for k, v in selector.items()):
        out.append(
            invalid(
                "spec.template.metadata.labels",
                labels,
                "`selector` does not match template `labels`",
            )
        )
    out += pod_spec_errors("spec.template.spec", template.get("spec") or {})
    return out


def pod_spec_errors(field: str, spec: dict[str, Any]) -> list[FieldError]:
    out: list[FieldError] = []
    containers = spec.get("containers") or []
    if not containers:
        out.append(required(f"{field}.containers"))
    for group in ("initContainers", "containers"):
        for index, container in enumerate(spec.get(group) or []):
            out += _container_errors(f"{field}.{group}[{index}]", container)
    for index, volume in enumerate(spec.get("volumes") or []):
        out += dns_label_errors(f"{field}.volumes[{index}].name", str(volume.get("name", "")))
    return out


def _container_errors(field: str, container: dict[str, Any]) -> list[FieldError]:
    out = []
    name = container.get("name")
    if not name:
        out.append(required(f"{field}.name"))
    else:
        out += dns_label_errors(f"{field}.name", str(name))
    if not container.get("image"):
        out.append(required(f"{field}.image"))
    for index, port in enumerate(container.get("ports") or []):
        number = port.get("containerPort")
        if not isinstance(number, int) or not 1 <= number <= 65535:
            out.append(
                invalid(
                    f"{field}.ports[{index}].containerPort",
                    number,
                    "must be between 1 and 65535, inclusive",
                )
            )
    resources = container.get("resources") or {}
    for part in ("limits", "requests"):
        for resource, quantity in (resources.get(part) or {}).items():
            where = f"{field}.resources.{part}[{resource}]"
            try:
                value, _ = parse_quantity(quantity)
            except BadQuantity as exc:
                out.append(invalid(where, quantity, str(exc).split(" (")[0]))
                continue
            if value < 0:
                out.append(invalid(where, quantity, "must be greater than or equal to 0"))
    limits, requests = resources.get("limits") or {}, resources.get("requests") or {}
    for resource, asked in requests.items():
        if resource in limits:
            try:
                if parse_quantity(asked)[0] > parse_quantity(limits[resource])[0]:
                    out.append(
                        invalid(
                            f"{field}.resources.requests",
                            asked,
                            f"must be less than or equal to {resource} limit of {limits[resource]}",
                        )
                    )
            except BadQuantity:
                pass
    return out


def _service(obj: dict[str, Any]) -> list[FieldError]:
    spec = obj.get("spec") or {}
    out: list[FieldError] = []
    ports = spec.get("ports") or []
    if (
        not ports
        and spec.get("type", "ClusterIP") != "ExternalName"
        and spec.get("clusterIP") != "None"
    ):
        out.append(required("spec.ports"))
    for index, port in enumerate(ports):
        number = port.get("port")
        if not isinstance(number, int) or not 1 <= number <= 65535:
            out.append(
                invalid(
                    f"spec.ports[{index}].port", number, "must be between 1 and 65535, inclusive"
                )
            )
        if len(ports) > 1 and not port.get("name"):
            out.append(required(f"spec.ports[{index}].name"))
        elif port.get("name"):
            out += dns_label_errors(f"spec.ports[{index}].name", str(port["name"]))
    return out


def _config_map(obj: dict[str, Any]) -> list[FieldError]:
    out: list[FieldError] = []
    total = 0
    for part in ("data", "binaryData"):
        for key, value in (obj.get(part) or {}).items():
            total += len(str(value))
            if len(key) > 253 or not _CONFIG_KEY.match(key):
                out.append(
                    invalid(
                        f"{part}[{key}]",
                        key,
                        "a valid config key must consist of alphanumeric characters, '-', '_' or '.' "
                        "(e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation "
                        "is '[-._a-zA-Z0-9]+')",
                    )
                )
    if total > 1 << 20:
        out.append(
            FieldError("FieldValueTooLong", "", "Too long: may not be more than 1048576 bytes")
        )
    return out


def _pvc(obj: dict[str, Any]) -> list[FieldError]:
    spec = obj.get("spec") or {}
    out: list[FieldError] = []
    if not spec.get("accessModes"):
        out.append(required("spec.accessModes"))
    if "storage" not in ((spec.get("resources") or {}).get("requests") or {}):
        out.append(required("spec.resources[storage]"))
    return out


_KIND_CHECKS = {
    "Deployment": _deployment,
    "Service": _service,
    "ConfigMap": _config_map,
    "PersistentVolumeClaim": _pvc,
    "Pod": lambda obj: pod_spec_errors("spec", obj.get("spec") or {}),
}


# -- defaults ------------------------------------------------------------------------------------


def set_defaults(obj: dict[str, Any], cluster_ip: str) -> None:
    """The defaults the API server fills into what specdeploy applies (in place)."""
    kind = obj.get("kind")
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    if kind == "Deployment":
        spec.setdefault("replicas", 1)
        strategy = spec.setdefault("strategy", {})
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            rolling = strategy.setdefault("rollingUpdate", {})
            rolling.setdefault("maxUnavailable", "25%")
            rolling.setdefault("maxSurge", "25%")
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("progressDeadlineSeconds", 600)
        template = spec.setdefault("template", {})
        template.setdefault("metadata", {}).setdefault("creationTimestamp", None)
        _pod_spec_defaults(template.setdefault("spec", {}))
    elif kind == "Pod":
        _pod_spec_defaults(spec)
    elif kind == "Service":
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        spec.setdefault("internalTrafficPolicy", "Cluster")
        if spec.get("type") != "ExternalName":
            spec.setdefault("clusterIP", cluster_ip)
            spec.setdefault("clusterIPs", [spec["clusterIP"]])
            spec.setdefault("ipFamilies", ["IPv4"])
            spec.setdefault("ipFamilyPolicy", "SingleStack")
        for port in spec.get("ports") or []:
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))
    elif kind == "PersistentVolumeClaim":
        spec.setdefault("volumeMode", "Filesystem")


def _pod_spec_defaults(spec: dict[str, Any]) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("enableServiceLinks", True)
    for group in ("initContainers", "containers"):
        for container in spec.get(group) or []:
            image = str(container.get("image", ""))
            latest = ":" not in image.rsplit("/", 1)[-1] or image.endswith(":latest")
            container.setdefault("imagePullPolicy", "Always" if latest else "IfNotPresent")
            container.setdefault("terminationMessagePath", "/dev/termination-log")
            container.setdefault("terminationMessagePolicy", "File")
            container.setdefault("resources", {})
            for port in container.get("ports") or []:
                port.setdefault("protocol", "TCP")
            for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
                found = container.get(probe)
                if isinstance(found, dict):
                    found.setdefault("timeoutSeconds", 1)
                    found.setdefault("periodSeconds", 10)
                    found.setdefault("successThreshold", 1)
                    found.setdefault("failureThreshold", 3)
                    if isinstance(found.get("httpGet"), dict):
                        found["httpGet"].setdefault("scheme", "HTTP")
    for volume in spec.get("volumes") or []:
        for source in ("configMap", "secret"):
            if isinstance(volume.get(source), dict):
                volume[source].setdefault("defaultMode", 420)


def crd_defaults(value: Any, schema: Any) -> Any:
    """Structural defaulting of a custom resource: `default` of each absent property of an object
    that is present (apiextensions-apiserver's structural defaulting)."""
    from tests.kube.schema import Schema

    assert isinstance(schema, Schema)
    if isinstance(value, dict) and schema.shape == "struct":
        for name, node in (schema.node.get("properties") or {}).items():
            if name not in value and isinstance(node, dict) and "default" in node:
                value[name] = _copy(node["default"])
        for name, child in value.items():
            sub = schema.field(name)
            if sub is not None and name != "metadata":
                crd_defaults(child, sub)
    elif isinstance(value, list) and schema.shape == "list":
        for item in value:
            crd_defaults(item, schema.items())
    return value


def _copy(value: Any) -> Any:
    import copy

    return copy.deepcopy(value)
