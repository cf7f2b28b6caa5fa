"""Leader election's rules (orchestrator/operator/leader.py, client-go's): exactly one candidate
holds the Lease, a follower takes over only a lease duration after it last saw the record change
(its own clock, so a holder's skewed timestamps do not matter), writes race on resourceVersion,
and a released Lease is taken at the next try. The store below answers as the API server does
for a Lease: 409 on create when it exists, 409 on replace when the resourceVersion moved."""

from __future__ import annotations

import copy
import datetime
from typing import Any

import pytest

from orchestrator.operator.leader import LEASE_NAME, Elector, Timing


class Store:
    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 100
        self.writes: list[str] = []

    def get(self) -> dict[str, Any] | None:
        return copy.deepcopy(self.lease)

    def create(self, body: dict[str, Any]) -> bool:
        if self.lease is not None:
            return False
        return self._store(body)

    def replace(self, body: dict[str, Any]) -> bool:
        if self.lease is None:
            return False
        if body["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
            return False  # 409: the object has been modified
        return self._store(body)

    def _store(self, body: dict[str, Any]) -> bool:
        self.version += 1
        self.lease = copy.deepcopy(body)
        self.lease["metadata"]["resourceVersion"] = str(self.version)
        self.writes.append(str(body["spec"]["holderIdentity"]))
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


TIMING = Timing(lease_s=15, renew_deadline_s=10, retry_s=2)


def candidates(store: Store, clock: Clock, skew_s: float = 0.0) -> tuple[Elector, Elector]:
    def wall(offset: float) -> Any:
        return lambda: (
            datetime.datetime(2026, 12, 3, tzinfo=datetime.timezone.utc)
            + (datetime.timedelta(seconds=clock.now + offset))
        )

    a = Elector(store, "a", "ops", TIMING, clock=clock, wall=wall(0.0))
    b = Elector(store, "b", "ops", TIMING, clock=clock, wall=wall(skew_s))
    return a, b


def test_the_first_candidate_leads_and_the_second_follows() -> None:
    store, clock = Store(), Clock()
    a, b = candidates(store, clock)
    assert a.try_acquire_or_renew() and a.leading
    assert not b.try_acquire_or_renew() and not b.leading and b.holder == "a"
    lease = store.get()
    assert lease is not None and lease["metadata"]["name"] == LEASE_NAME
    assert lease["spec"]["holderIdentity"] == "a" and lease["spec"]["leaseDurationSeconds"] == 15
    assert lease["spec"]["renewTime"].endswith("Z") and "." in lease["spec"]["renewTime"]


def test_a_follower_takes_over_only_a_lease_after_it_last_saw_a_change() -> None:
    store, clock = Store(), Clock()
    a, b = candidates(store, clock, skew_s=-3600)  # b's wall clock an hour behind: no matter
    a.try_acquire_or_renew()
    for _ in range(5):  # a renews every 2 s; b never gets it
        clock.now += 2
        assert a.try_acquire_or_renew()
        assert not b.try_acquire_or_renew()
    # a stops renewing (its process is gone); b last saw a change at this moment
    clock.now += 14
    assert not b.try_acquire_or_renew()
    clock.now += 1.5
    assert b.try_acquire_or_renew() and b.leading
    lease = store.get()
    assert lease is not None and lease["spec"]["leaseTransitions"] == 1
    # a, back, has not renewed for longer than its deadline: it knows it no longer leads
    assert not a.leading
    assert not a.try_acquire_or_renew()


def test_the_leader_stops_leading_before_a_follower_may_take_over() -> None:
    store, clock = Store(), Clock()
    a, _ = candidates(store, clock)
    a.try_acquire_or_renew()
    clock.now += TIMING.renew_deadline_s - 0.1
    assert a.leading
    clock.now += 0.2
    assert not a.leading  # 10 s without a renewal: stop acting, 5 s before anyone may take over


def test_of_two_writes_on_one_read_only_one_wins() -> None:
    store, clock = Store(), Clock()
    a, b = candidates(store, clock)
    a.try_acquire_or_renew()
    a.release()
    # both read the released Lease, then both write: the second write's resourceVersion is stale
    read = store.get()
    original_get = store.get
    store.get = lambda: copy.deepcopy(read)  # type: ignore[method-assign]
    assert a.try_acquire_or_renew() is True
    assert b.try_acquire_or_renew() is False
    store.get = original_get  # type: ignore[method-assign]
    assert store.writes[-1] == "a"


def test_a_released_lease_is_taken_at_the_next_try() -> None:
    store, clock = Store(), Clock()
    a, b = candidates(store, clock)
    a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    assert a.release() and not a.leading
    lease = store.get()
    assert lease is not None
    assert lease["spec"]["holderIdentity"] == "" and lease["spec"]["leaseDurationSeconds"] == 1
    clock.now += 2
    assert b.try_acquire_or_renew() and b.leading
    assert not a.release()  # not its Lease any more: nothing written
    assert store.writes[-1] == "b"


def test_timings_must_nest() -> None:
    with pytest.raises(ValueError, match=r"retry .* < renew deadline .* < lease"):
        Timing(lease_s=10, renew_deadline_s=12, retry_s=2)
    scaled = Timing.for_lease(6)
    assert scaled.retry_s < scaled.renew_deadline_s < scaled.lease_s == 6
