"""The control plane around the imitation's API server, each on a background thread tick:

* `gc`: the garbage collector. An object whose owners (ownerReferences, by uid) are gone is
  deleted some time later, not inside the owner's DELETE (recorded:
  ../shared/referees/kube-apiserver/README.md, "Dependents (ReplicaSets, Pods, owned objects) are
  deleted by the controller-manager's garbage collector, asynchronously (about 0.3-5 s here)";
  `gc_delay` is that time, 0.3 s by default). Foreground deletion (`foregroundDeletion`) waits for
  the dependents; `orphan` removes the ownerReferences instead.
* `namespace`: a namespace being deleted loses its objects, then goes.
* `deployment` and `replicaset`: a Deployment gets a ReplicaSet per pod template (named with the
  template's hash), a ReplicaSet gets its Pods; both write status as `kube-controller-manager`
  through the status subresource (recorded: "an `Update` entry for `kube-controller-manager`
  (subresource `status`)").
* `scheduler`: binds a Pod to a node that has the GPUs it asks for (nvidia.com/gpu, amd.com/gpu;
  CPU and memory are not counted), matches its nodeSelector and tolerates the node's NoSchedule
  taints; else the Pod stays Pending with PodScheduled=False and a `FailedScheduling` Event whose
  message is worded as the scheduler's (recorded: "Scheduling").
* `kubelet`: a bound Pod becomes Running and Ready after `kubelet_delay` (the recording's
  "simulated GPU nodes that mark bound Pods Running"); no container runs and no probe is made.

There is no LeaderWorkerSet controller, so a LeaderWorkerSet is stored and never gets Pods, and no
Event says why (recorded: "Without an LWS controller, a LeaderWorkerSet is stored and never gets
Pods").
"""

from __future__ import annotations

import copy
import hashlib
import json
import secrets
import threading
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.kube.server import Imitation, Key

GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")
MANAGER = "kube-controller-manager"


def node_body(
    name: str,
    *,
    gpus: int = 0,
    gpu_resource: str = "nvidia.com/gpu",
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """A Node as a kubelet (and a GPU device plugin) would register it."""
    allocatable = {"cpu": "16", "memory": "64Gi", "pods": "110"}
    if gpus:
        allocatable[gpu_resource] = str(gpus)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {"taints": taints or []},
        "status": {
            "capacity": dict(allocatable),
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


class Controllers:
    def __init__(
        self, api: Imitation, enabled: set[str], *, gc_delay: float, kubelet_delay: float
    ) -> None:
        self.api = api
        self.enabled = enabled
        self.gc_delay = gc_delay
        self.kubelet_delay = kubelet_delay
        self._orphans: dict[str, float] = {}
        """uid of an object whose owners are gone -> when the collector first saw it so."""
        self._bound: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def _run(self) -> None:
        pause = 0.05
        while not self._stop.wait(pause):
            began = time.monotonic()
            try:
                self.tick()
            except Exception:  # a controller bug must not stop the others; tests see the state
                import logging

                logging.getLogger(__name__).exception("imitation controller tick failed")
            # a pass holds the store's lock: at 10,000 objects it takes a while, and the API's
            # handlers must get at least twice that between passes
            pause = max(0.05, 2 * (time.monotonic() - began))

    def settle(self, rounds: int = 50) -> None:
        """Run every controller now, ignoring its delays, until nothing changes."""
        for _ in range(rounds):
            if not self.tick(immediate=True):
                return

    def tick(self, *, immediate: bool = False) -> bool:
        changed = False
        with self.api.changed:
            for name in ("namespace", "gc", "deployment", "replicaset", "scheduler", "kubelet"):
                if name in self.enabled:
                    changed |= bool(getattr(self, f"_{name}")(immediate))
        return changed

    # -- garbage collection ------------------------------------------------------------------------

    def _gc(self, immediate: bool) -> bool:
        objects = self.api.view()
        uids = {o["metadata"]["uid"]: k for k, o in objects.items()}
        now = time.monotonic()
        changed = False
        for key, obj in objects.items():
            meta = obj["metadata"]
            refs = meta.get("ownerReferences") or []
            if not refs or meta.get("deletionTimestamp"):
                continue
            owners = [objects[uids[r["uid"]]] for r in refs if r.get("uid") in uids]
            foreground = any(
                o["metadata"].get("deletionTimestamp")
                and "foregroundDeletion" in (o["metadata"].get("finalizers") or [])
                for o in owners
            )
            if owners and not foreground:
                self._orphans.pop(meta["uid"], None)
                continue
            seen = self._orphans.setdefault(meta["uid"], now)
            if immediate or now - seen >= self.gc_delay:
                self._orphans.pop(meta["uid"], None)
                self.api.request_deletion(key, "Background")
                changed = True
        for key, obj in objects.items():
            meta = obj["metadata"]
            finalizers = meta.get("finalizers") or []
            if not meta.get("deletionTimestamp"):
                continue
            now_stored = self.api.view()
            if key not in now_stored:
                continue
            uid = meta["uid"]
            dependents = [
                k
                for k, o in now_stored.items()
                if any(r.get("uid") == uid for r in o["metadata"].get("ownerReferences") or [])
            ]
            if "orphan" in finalizers:
                for dep in dependents:
                    found = copy.deepcopy(self.api.view()[dep])
                    found["metadata"]["ownerReferences"] = [
                        r for r in found["metadata"]["ownerReferences"] if r.get("uid") != uid
                    ]
                    self.api.system_update(dep, found, MANAGER)
                changed |= self._drop_finalizer(key, "orphan")
            elif "foregroundDeletion" in finalizers and not dependents:
                changed |= self._drop_finalizer(key, "foregroundDeletion")
        return changed

    def _drop_finalizer(self, key: Key, finalizer: str) -> bool:
        found = copy.deepcopy(self.api.view().get(key))
        if found is None:
            return False
        found["metadata"]["finalizers"] = [
            f for f in found["metadata"].get("finalizers") or [] if f != finalizer
        ]
        self.api.system_update(key, found, MANAGER)
        return True

    def _namespace(self, immediate: bool) -> bool:
        changed = False
        objects = self.api.view()
        for key, ns in objects.items():
            if key[:2] != ("", "namespaces") or not ns["metadata"].get("deletionTimestamp"):
                continue
            inside = [k for k in objects if k[2] == key[3] and k[:2] != ("", "namespaces")]
            for item in inside:
                if not objects[item]["metadata"].get("deletionTimestamp"):
                    self.api.request_deletion(item, "Background")
                    changed = True
            if not [k for k in self.api.view() if k[2] == key[3] and k[:2] != ("", "namespaces")]:
                self.api.system_remove(key)
                changed = True
        return changed

    # -- workloads ------------------------------------------------------------------------------

    def _deployment(self, immediate: bool) -> bool:
        changed = False
        objects = self.api.view()
        children = _children(objects)
        for key, deployment in objects.items():
            if key[:2] != ("apps", "deployments") or deployment["metadata"].get(
                "deletionTimestamp"
            ):
                continue
            spec = deployment.get("spec") or {}
            template = copy.deepcopy(spec.get("template") or {})
            digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:10]
            rs_name = f"{key[3]}-{digest}"
            labels = {
                **((template.get("metadata") or {}).get("labels") or {}),
                "pod-template-hash": digest,
            }
            template.setdefault("metadata", {})["labels"] = labels
            owned = _owned(children, deployment, ("apps", "replicasets"))
            desired = int(spec.get("replicas", 1))
            for rs_key, rs in owned:
                if rs_key[3] != rs_name and int((rs.get("spec") or {}).get("replicas", 0)) != 0:
                    rs = copy.deepcopy(rs)
                    rs["spec"]["replicas"] = 0
                    self.api.system_update(rs_key, rs, MANAGER)
                    changed = True
            new_key = (key[0], "replicasets", key[2], rs_name)
            current = objects.get(new_key)
            if current is None:
                selector = copy.deepcopy(spec.get("selector") or {})
                selector.setdefault("matchLabels", {})["pod-template-hash"] = digest
                self.api.system_create(
                    new_key,
                    {
                        "apiVersion": "apps/v1",
                        "kind": "ReplicaSet",
                        "metadata": {
                            "name": rs_name,
                            "namespace": key[2],
                            "labels": labels,
                            "ownerReferences": [_owner(deployment)],
                        },
                        "spec": {"replicas": desired, "selector": selector, "template": template},
                    },
                    MANAGER,
                )
                changed = True
            elif int(current["spec"].get("replicas", 0)) != desired:
                current = copy.deepcopy(current)
                current["spec"]["replicas"] = desired
                self.api.system_update(new_key, current, MANAGER)
                changed = True
            changed |= self._deployment_status(key, deployment, new_key, objects, children)
        return changed

    def _deployment_status(
        self,
        key: Key,
        deployment: dict[str, Any],
        new_key: Key,
        objects: dict[Key, dict[str, Any]],
        children: Children,
    ) -> bool:
        """From the ReplicaSets' status as this pass read it (one written in this pass has
        none yet either way; the replicaset controller runs after this one)."""
        owned = _owned(children, deployment, ("apps", "replicasets"))
        total = {"replicas": 0, "readyReplicas": 0, "availableReplicas": 0}
        for _, rs in owned:
            for field in total:
                total[field] += int((rs.get("status") or {}).get(field, 0))
        updated = int((objects.get(new_key, {}).get("status") or {}).get("replicas", 0))
        desired = int((deployment.get("spec") or {}).get("replicas", 1))
        available = total["availableReplicas"] >= desired
        status: dict[str, Any] = {
            "observedGeneration": deployment["metadata"].get("generation", 1),
            **{k: v for k, v in total.items() if v},
            **({"updatedReplicas": updated} if updated else {}),
            **(
                {"unavailableReplicas": desired - total["availableReplicas"]}
                if not available
                else {}
            ),
            "conditions": [
                {
                    "type": "Available",
                    "status": "True" if available else "False",
                    "reason": "MinimumReplicasAvailable"
                    if available
                    else "MinimumReplicasUnavailable",
                    "message": "Deployment has minimum availability."
                    if available
                    else "Deployment does not have minimum availability.",
                },
                {
                    "type": "Progressing",
                    "status": "True",
                    "reason": "NewReplicaSetAvailable" if available else "ReplicaSetUpdated",
                    "message": f'ReplicaSet "{new_key[3]}" '
                    + ("has successfully progressed." if available else "is progressing."),
                },
            ],
        }
        old = deployment.get("status") or {}
        if _without_times(old) == _without_times(status):
            return False
        for condition in status["conditions"]:
            before = next(
                (c for c in old.get("conditions") or [] if c["type"] == condition["type"]), None
            )
            same = before is not None and before.get("status") == condition["status"]
            condition["lastTransitionTime"] = (
                before["lastTransitionTime"] if same and before else _now()
            )
            condition["lastUpdateTime"] = _now()
        self.api.system_update(key, {**deployment, "status": status}, MANAGER, "status")
        return True

    def _replicaset(self, immediate: bool) -> bool:
        changed = False
        objects = self.api.view()
        children = _children(objects)
        for key, rs in objects.items():
            if key[:2] != ("apps", "replicasets") or rs["metadata"].get("deletionTimestamp"):
                continue
            desired = int((rs.get("spec") or {}).get("replicas", 1))
            pods = [
                (k, p)
                for k, p in _owned(children, rs, ("", "pods"))
                if not p["metadata"].get("deletionTimestamp")
            ]
            template = (rs.get("spec") or {}).get("template") or {}
            created: list[tuple[Key, dict[str, Any]]] = []
            for _ in range(desired - len(pods)):
                name = f"{key[3]}-{secrets.token_hex(3)[:5]}"
                pod_key: Key = ("", "pods", key[2], name)
                made = self.api.system_create(
                    pod_key,
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "metadata": {
                            "name": name,
                            "namespace": key[2],
                            "labels": copy.deepcopy(
                                (template.get("metadata") or {}).get("labels") or {}
                            ),
                            "annotations": copy.deepcopy(
                                (template.get("metadata") or {}).get("annotations") or {}
                            ),
                            "ownerReferences": [_owner(rs)],
                        },
                        "spec": copy.deepcopy(template.get("spec") or {}),
                        "status": {"phase": "Pending", "qosClass": "BestEffort"},
                    },
                    MANAGER,
                )
                created.append((pod_key, made))
                changed = True
            for extra, _ in pods[desired:]:
                self.api.request_deletion(extra)
                changed = True
            pods = sorted(pods[:desired] + created)  # what is left, as the store now has it
            ready = sum(1 for _, p in pods if _ready(p))
            status = {
                "replicas": len(pods),
                "fullyLabeledReplicas": len(pods),
                "observedGeneration": rs["metadata"].get("generation", 1),
            }
            if ready:
                status.update(readyReplicas=ready, availableReplicas=ready)
            if (rs.get("status") or {}) != status:
                self.api.system_update(key, {**rs, "status": status}, MANAGER, "status")
                changed = True
        return changed

    # -- scheduling and the nodes --------------------------------------------------------------------

    def _scheduler(self, immediate: bool) -> bool:
        changed = False
        objects = self.api.view()
        nodes = sorted(
            (n for k, n in objects.items() if k[:2] == ("", "nodes")),
            key=lambda n: n["metadata"]["name"],
        )
        usage = _usage(objects)
        for key, pod in objects.items():
            spec = pod.get("spec") or {}
            if (
                key[:2] != ("", "pods")
                or spec.get("nodeName")
                or pod["metadata"].get("deletionTimestamp")
            ):
                continue
            if spec.get("schedulerName", "default-scheduler") != "default-scheduler":
                continue
            chosen, reasons = _fit(pod, nodes, usage)
            status = copy.deepcopy(pod.get("status") or {})
            if chosen is not None:
                bound = copy.deepcopy(pod)
                bound["spec"]["nodeName"] = chosen
                self.api.system_update(key, bound, "kube-scheduler")
                status["conditions"] = [
                    {"type": "PodScheduled", "status": "True", "lastTransitionTime": _now()}
                ]
                self.api.system_update(
                    key, {**self.api.view()[key], "status": status}, "kube-scheduler", "status"
                )
                for resource, n in _requests(pod).items():  # bound: counts for the next pod
                    on = usage.setdefault(chosen, {})
                    on[resource] = on.get(resource, 0) + n
                self._bound[pod["metadata"]["uid"]] = time.monotonic()
                changed = True
                continue
            message = _unschedulable(reasons, len(nodes))
            condition = {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": message,
            }
            old = next(
                (c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), {}
            )
            if {k: old.get(k) for k in condition} == condition:
                continue
            status["conditions"] = [{**condition, "lastTransitionTime": _now()}]
            self.api.system_update(key, {**pod, "status": status}, "kube-scheduler", "status")
            self._event(pod, "FailedScheduling", message, "default-scheduler")
            changed = True
        return changed

    def _event(self, pod: dict[str, Any], reason: str, message: str, component: str) -> None:
        meta = pod["metadata"]
        name = f"{meta['name']}.{secrets.token_hex(8)}"
        self.api.system_create(
            ("", "events", meta["namespace"], name),
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": name, "namespace": meta["namespace"]},
                "involvedObject": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": meta["name"],
                    "namespace": meta["namespace"],
                    "uid": meta["uid"],
                },
                "reason": reason,
                "message": message,
                "type": "Warning",
                "count": 1,
                "source": {"component": component},
                "reportingComponent": component,
                "firstTimestamp": _now(),
                "lastTimestamp": _now(),
            },
            component,
        )

    def _kubelet(self, immediate: bool) -> bool:
        changed = False
        now = time.monotonic()
        for key, pod in self.api.view().items():
            if key[:2] != ("", "pods") or not (pod.get("spec") or {}).get("nodeName"):
                continue
            if pod["metadata"].get("deletionTimestamp"):
                self.api.system_remove(key)
                changed = True
                continue
            status = pod.get("status") or {}
            if status.get("phase") != "Pending":
                continue
            bound_at = self._bound.setdefault(pod["metadata"]["uid"], now)
            if not immediate and now - bound_at < self.kubelet_delay:
                continue
            n = int(pod["metadata"]["uid"][:8], 16)
            started = _now()
            ready = [
                {"type": t, "status": "True", "lastTransitionTime": started}
                for t in (
                    "PodReadyToStartContainers",
                    "Initialized",
                    "Ready",
                    "ContainersReady",
                    "PodScheduled",
                )
            ]
            containers = [
                {
                    "name": c["name"],
                    "image": c.get("image", ""),
                    "imageID": "",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": started}},
                }
                for c in (pod["spec"].get("containers") or [])
            ]
            self.api.system_update(
                key,
                {
                    **pod,
                    "status": {
                        **status,
                        "phase": "Running",
                        "conditions": ready,
                        "containerStatuses": containers,
                        "hostIP": "172.18.0.2",
                        "podIP": f"10.244.{n // 250}.{n % 250 + 1}",
                        "startTime": started,
                    },
                },
                "kubelet",
                "status",
            )
            changed = True
        return changed

    # -- helpers ------------------------------------------------------------------------------------


Children = dict[str, list[tuple["Key", dict[str, Any]]]]
"""Owner uid -> the objects whose ownerReferences name it."""


def _children(objects: dict[Key, dict[str, Any]]) -> Children:
    """Every object under each owner uid, read once per pass (scanning every object for every
    owner was quadratic: minutes a pass at 1,000 resources)."""
    found: Children = {}
    for key, obj in objects.items():
        for ref in obj["metadata"].get("ownerReferences") or []:
            if ref.get("uid"):
                found.setdefault(ref["uid"], []).append((key, obj))
    return found


def _owned(
    children: Children, owner: dict[str, Any], kind: tuple[str, str]
) -> list[tuple[Key, dict[str, Any]]]:
    return sorted((k, o) for k, o in children.get(owner["metadata"]["uid"], []) if k[:2] == kind)


def _owner(obj: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _ready(pod: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _requests(pod: dict[str, Any]) -> dict[str, int]:
    asked: dict[str, int] = {}
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        for resource in GPU_RESOURCES:
            value = (resources.get("limits") or {}).get(resource) or (
                resources.get("requests") or {}
            ).get(resource)
            if value is not None:
                asked[resource] = asked.get(resource, 0) + int(str(value))
    return asked


def _fit(
    pod: dict[str, Any], nodes: list[dict[str, Any]], usage: dict[str, dict[str, int]]
) -> tuple[str | None, list[str]]:
    """The first node the Pod fits on, else one reason per node (the first filter that fails,
    in the default profile's order: taints, node affinity/selector, resources)."""
    asked = _requests(pod)
    spec = pod.get("spec") or {}
    reasons = []
    for node in nodes:
        taint = _untolerated(node, spec.get("tolerations") or [])
        if taint is not None:
            reasons.append(
                f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value', '')}}}"
            )
            continue
        labels = node["metadata"].get("labels") or {}
        if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
            reasons.append("node(s) didn't match Pod's node affinity/selector")
            continue
        used = usage.get(node["metadata"]["name"], {})
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        short = [r for r, n in asked.items() if int(allocatable.get(r, 0)) - used.get(r, 0) < n]
        if short:
            reasons.append(f"Insufficient {short[0]}")
            continue
        return node["metadata"]["name"], []
    return None, reasons


def _untolerated(node: dict[str, Any], tolerations: list[dict[str, Any]]) -> dict[str, Any] | None:
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not any(
            (t.get("key") in (None, "", taint.get("key")))
            and (t.get("operator") == "Exists" or t.get("value") == taint.get("value"))
            and t.get("effect") in (None, "", taint.get("effect"))
            for t in tolerations
        ):
            return taint
    return None


def _usage(objects: dict[Any, dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Node name -> what the Pods bound to it request (GPUs), every node in one pass."""
    used: dict[str, dict[str, int]] = {}
    for key, pod in objects.items():
        node = (pod.get("spec") or {}).get("nodeName") if key[:2] == ("", "pods") else None
        if node:
            on = used.setdefault(node, {})
            for resource, n in _requests(pod).items():
                on[resource] = on.get(resource, 0) + n
    return used


def _unschedulable(reasons: list[str], total: int) -> str:
    """The scheduler's FitError wording, as recorded: `0/3 nodes are available: 1 node(s) didn't
    match Pod's node affinity/selector, 2 Insufficient nvidia.com/gpu. no new claims to
    deallocate, preemption: 0/3 nodes are available: ...`."""
    if not total:
        return "no nodes available to schedule pods"
    counts: dict[str, int] = {}
    for reason in reasons:
        counts[reason] = counts.get(reason, 0) + 1
    listed = ", ".join(sorted(f"{n} {r}" for r, n in counts.items()))
    helpless = sum(n for r, n in counts.items() if not r.startswith("Insufficient"))
    victims = total - helpless
    preemption = ", ".join(
        part
        for part in (
            f"{helpless} Preemption is not helpful for scheduling" if helpless else "",
            f"{victims} No preemption victims found for incoming pod" if victims else "",
        )
        if part
    )
    return (
        f"0/{total} nodes are available: {listed}. no new claims to deallocate, "
        f"preemption: 0/{total} nodes are available: {preemption}."
    )


def _without_times(status: dict[str, Any]) -> str:
    conditions = [
        {k: v for k, v in c.items() if not k.endswith("Time")}
        for c in status.get("conditions") or []
    ]
    return json.dumps({**status, "conditions": conditions}, sort_keys=True)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
