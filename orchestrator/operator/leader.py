"""Leader election on a coordination.k8s.io/v1 Lease, so that of several operator replicas
exactly one acts.

The rules are client-go's (`tools/leaderelection/leaderelection.go` at kubernetes v1.36.0):

* a candidate takes the Lease when it does not exist, names no holder, or has not changed for
  `leaseDurationSeconds` *as this candidate observed it* (its own clock from when it last saw
  the record change, never the holder's timestamps, so clock skew between nodes does not matter);
* every write carries the resourceVersion it read, so of two candidates only one wins (the
  other gets 409 and stays a follower);
* the leader renews every `retry` seconds and stops acting once it has not renewed for
  `renew_deadline` seconds, which is shorter than the lease: it stops before any follower may
  take over;
* on a clean stop the leader releases the Lease (holder "", a 1 s duration), so a follower takes
  over at its next try instead of a lease duration later.

The operator runs kopf only while it leads; on losing the Lease it stops and exits non-zero, so
its pod restarts and campaigns again (what controller-runtime managers do).
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Protocol

LEASE_NAME: Final = "specdeploy-operator"
LEASE_S: Final = 15.0
RENEW_DEADLINE_S: Final = 10.0
RETRY_S: Final = 2.0


class LeaseStore(Protocol):
    """Reads and writes one Lease; create/replace answer False when another writer won (409)."""

    def get(self) -> dict[str, Any] | None: ...

    def create(self, body: dict[str, Any]) -> bool: ...

    def replace(self, body: dict[str, Any]) -> bool: ...


@dataclass(frozen=True)
class Timing:
    lease_s: float = LEASE_S
    renew_deadline_s: float = RENEW_DEADLINE_S
    retry_s: float = RETRY_S

    def __post_init__(self) -> None:
        if not 0 < self.retry_s < self.renew_deadline_s < self.lease_s:
            raise ValueError(
                f"leader election needs retry ({self.retry_s:g} s) < renew deadline "
                f"({self.renew_deadline_s:g} s) < lease ({self.lease_s:g} s)"
            )

    @classmethod
    def for_lease(cls, lease_s: float) -> Timing:
        """client-go's proportions (15/10/2) scaled to `lease_s`."""
        return cls(lease_s, lease_s * 2 / 3, lease_s * 2 / 15)


class Elector:
    """One candidate's view of the Lease."""

    def __init__(
        self,
        store: LeaseStore,
        identity: str,
        namespace: str,
        timing: Timing = Timing(),
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(
            datetime.timezone.utc
        ),
    ) -> None:
        self.store = store
        self.identity = identity
        self.namespace = namespace
        self.timing = timing
        self._clock = clock
        self._wall = wall
        self._observed: tuple[tuple[Any, ...], float] | None = None
        self.holder: str | None = None
        """The holder the last read named (None: nobody)."""
        self.last_renewed: float | None = None
        """When this candidate last wrote itself as holder (its clock)."""

    @property
    def leading(self) -> bool:
        renewed = self.last_renewed
        return renewed is not None and self._clock() - renewed < self.timing.renew_deadline_s

    def try_acquire_or_renew(self) -> bool:
        """One attempt; True when this candidate holds the Lease now."""
        now = self._clock()
        stamp = _micro_time(self._wall())
        current = self.store.get()
        if current is None:
            won = self.store.create(self._body(stamp, stamp, 0, None))
            return self._wrote(won, now, stamp)
        spec = current.get("spec") or {}
        record = (
            spec.get("holderIdentity"),
            spec.get("renewTime"),
            spec.get("leaseDurationSeconds"),
            spec.get("leaseTransitions"),
        )
        if self._observed is None or self._observed[0] != record:
            self._observed = (record, now)
        holder = spec.get("holderIdentity") or None
        self.holder = holder
        duration = _positive(spec.get("leaseDurationSeconds"), self.timing.lease_s)
        if holder not in (None, self.identity) and now < self._observed[1] + duration:
            return False  # another candidate holds a live lease
        transitions = int(spec.get("leaseTransitions") or 0)
        acquired = spec.get("acquireTime") or stamp
        if holder != self.identity:
            transitions, acquired = transitions + 1, stamp
        version = (current.get("metadata") or {}).get("resourceVersion")
        won = self.store.replace(self._body(acquired, stamp, transitions, version))
        return self._wrote(won, now, stamp)

    def release(self) -> bool:
        """Give the Lease up if this candidate holds it (no holder, a 1 s duration)."""
        current = self.store.get()
        spec = (current or {}).get("spec") or {}
        if current is None or spec.get("holderIdentity") != self.identity:
            return False
        stamp = _micro_time(self._wall())
        body = self._body(
            stamp,
            stamp,
            int(spec.get("leaseTransitions") or 0),
            (current.get("metadata") or {}).get("resourceVersion"),
        )
        body["spec"].update(holderIdentity="", leaseDurationSeconds=1)  # client-go's release
        released = self.store.replace(body)
        if released:
            self.last_renewed = None
        return released

    def _wrote(self, won: bool, now: float, stamp: str) -> bool:
        if won:
            self.last_renewed = now
            self.holder = self.identity
            record = (self.identity, stamp, int(self.timing.lease_s), None)
            self._observed = (record, now)
        return won

    def _body(
        self, acquired: str, renewed: str, transitions: int, version: str | None
    ) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": LEASE_NAME, "namespace": self.namespace}
        if version is not None:
            metadata["resourceVersion"] = version
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": max(1, round(self.timing.lease_s)),
                "acquireTime": acquired,
                "renewTime": renewed,
                "leaseTransitions": transitions,
            },
        }


def _micro_time(moment: datetime.datetime) -> str:
    """A Kubernetes MicroTime (RFC 3339 with microseconds, UTC)."""
    return moment.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _positive(value: Any, default: float) -> float:
    return (
        float(value)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0
        else default
    )


class KubeLeaseStore:
    """The Lease through the cluster client's dynamic API (409 answers are lost races)."""

    def __init__(self, cluster: Any, namespace: str) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self._resource = cluster.resource("coordination.k8s.io/v1", "Lease")

    def get(self) -> dict[str, Any] | None:
        with self.cluster.calling(f"read Lease {self.namespace}/{LEASE_NAME}"):
            found: dict[str, Any] | None = self.cluster.get_object(
                self._resource, LEASE_NAME, self.namespace
            )
            return found

    def create(self, body: dict[str, Any]) -> bool:
        return self._write(lambda: self._resource.create(body=body, namespace=self.namespace))

    def replace(self, body: dict[str, Any]) -> bool:
        return self._write(lambda: self._resource.replace(body=body, namespace=self.namespace))

    def _write(self, call: Callable[[], Any]) -> bool:
        from kubernetes.dynamic.exceptions import ConflictError

        try:
            with self.cluster.calling(f"write Lease {self.namespace}/{LEASE_NAME}"):
                call()
        except Exception as exc:
            if isinstance(exc.__cause__, ConflictError) or isinstance(exc, ConflictError):
                return False
            raise
        return True
