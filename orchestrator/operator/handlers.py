"""The kopf operator: handlers for SpeculativeDeployment resources, and how it runs.

* create / update / resume: `reconcile` (plan, conditions, apply the owned objects). Status-only
  changes do not trigger it (kopf compares the resource without its status). A cluster error is a
  kopf TemporaryError: retried with a delay, never a crash loop; an invalid resource is a status
  condition and an Event, and no retry.
* a daemon per resource: `loop.tick` every `policy.interval_seconds`, waiting without a thread.
* deletion: nothing to do here. Every owned object carries an ownerReference to the resource,
  so Kubernetes' garbage collector deletes them. kopf puts its finalizer (`specdeploy.io/operator`)
  on a resource while its daemon runs, to stop the daemon before the resource goes: a resource
  deleted while the operator is down stays until the operator is back (or the finalizer is
  removed by hand).

Reconciles, intervals and running control loops are counted in the operator's own /metrics
(`orchestrator/operator/metrics.py`).

kopf keeps its own bookkeeping in annotations prefixed `specdeploy.io/` (progress and the last
handled spec), never in the status the operator writes.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import threading
import time
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import kopf

from orchestrator.deploy.kubernetes_cluster import KubernetesCluster
from orchestrator.errors import DeployError
from orchestrator.operator.crd import GROUP, PLURAL, VERSION
from orchestrator.operator.loop import Scrapes, tick
from orchestrator.operator.metrics import INTERVAL_FAILURES_TOTAL, INTERVAL_SECONDS, RESOURCES
from orchestrator.operator.reconcile import Emit, counted_reconcile
from orchestrator.operator.source import InClusterCheckpoints
from orchestrator.profile.schema import PolicySpec

_log = logging.getLogger("specdeploy.operator")

#: Seconds before a failed reconcile is retried (kopf's TemporaryError delay).
RETRY_DELAY_S = 30.0
#: Threads for the control loops' intervals (scrapes and status patches), shared by every
#: resource: an interval takes at most its scrape deadlines, so a handful keeps a thousand
#: resources at 30 s intervals on time while kopf's own pool stays free for planning.
INTERVAL_WORKERS = 8
#: Tick period when the resource does not say (policy omitted or unreadable).
DEFAULT_INTERVAL_S = float(PolicySpec().interval_seconds)


@dataclass
class OperatorConfig:
    namespaces: Collection[str] = ()
    all_namespaces: bool = False
    offline: bool = False
    liveness: str | None = None


def build_registry(cluster_factory: Any, source: InClusterCheckpoints) -> kopf.OperatorRegistry:
    """The handlers, on a registry of their own (importing this module registers nothing)."""
    registry = kopf.OperatorRegistry()
    scrapes = Scrapes()
    intervals = ThreadPoolExecutor(max_workers=INTERVAL_WORKERS, thread_name_prefix="interval")
    clusters: dict[str, KubernetesCluster] = {}
    lock = threading.Lock()

    def cluster() -> KubernetesCluster:
        with lock:  # one client (and discovery cache) per operator process
            if "c" not in clusters:
                clusters["c"] = cluster_factory()
            return clusters["c"]

    @kopf.on.login(registry=registry)
    def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        found: kopf.ConnectionInfo | None = kopf.login_with_service_account(**kwargs)
        return found or kopf.login_with_kubeconfig(**kwargs)

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
        settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
            prefix=GROUP, key="last-handled-configuration"
        )
        # kopf stops the daemon before a resource goes; its finalizer says whose it is.
        settings.persistence.finalizer = f"{GROUP}/operator"
        settings.posting.level = logging.WARNING  # Events are the operator's own, not log lines
        settings.scanning.disabled = True
        settings.peering.standalone = True
        settings.watching.server_timeout = 300

    @kopf.on.resume(GROUP, VERSION, PLURAL, registry=registry)
    @kopf.on.create(GROUP, VERSION, PLURAL, registry=registry)
    @kopf.on.update(GROUP, VERSION, PLURAL, registry=registry)
    def on_change(body: kopf.Body, patch: kopf.Patch, **_: Any) -> None:
        raw = dict(body)
        try:
            status = counted_reconcile("change", raw, source, cluster(), _emitter(body))
        except DeployError as exc:
            kopf.warn(body, reason="ClusterError", message=f"{exc.what}: {exc.why}"[:1000])
            raise kopf.TemporaryError(f"{exc.what}: {exc.why}", delay=RETRY_DELAY_S) from exc
        patch.status.update(status)

    def one_interval(raw: dict[str, Any], body: kopf.Body, logger: Any) -> None:
        started = time.monotonic()
        try:
            status = tick(raw, source, cluster(), scrapes, _emitter(body))
            if status is not None:
                meta = raw["metadata"]
                cluster().patch_status(
                    f"{GROUP}/{VERSION}",
                    "SpeculativeDeployment",
                    meta["name"],
                    meta["namespace"],
                    status,
                )
        except DeployError as exc:
            INTERVAL_FAILURES_TOTAL.inc(reason="cluster_error")
            logger.warning(f"control loop: {exc.what}: {exc.why}")
        except Exception:  # one bad interval must not end the loop for this resource
            INTERVAL_FAILURES_TOTAL.inc(reason="error")
            logger.exception("control loop: interval failed")
        finally:
            INTERVAL_SECONDS.observe(time.monotonic() - started)

    @kopf.daemon(GROUP, VERSION, PLURAL, cancellation_timeout=10.0, registry=registry)
    async def control_loop(
        body: kopf.Body, stopped: kopf.DaemonStopped, logger: Any, **_: Any
    ) -> None:
        """Async, so that a resource waiting for its next interval holds no thread: a sync
        daemon keeps one of kopf's executor threads for its whole life, and with the default
        pool (CPUs + 4 threads) a dozen resources left none for planning. Only an interval's
        work runs in a thread, from a pool of its own so it never starves the handlers."""
        loop = asyncio.get_running_loop()
        RESOURCES.inc()
        try:
            while not stopped:
                await stopped.wait(_interval(body))
                if stopped:
                    return
                # kopf.event posts through context variables of the daemon's task: carry them.
                context = contextvars.copy_context()
                work = functools.partial(one_interval, dict(body), body, logger)
                await loop.run_in_executor(intervals, context.run, work)
        finally:
            RESOURCES.dec()

    return registry


def _interval(body: kopf.Body) -> float:
    spec = body.get("spec")
    policy = (spec.get("policy") if isinstance(spec, dict) else None) or {}
    try:
        return float(policy.get("interval_seconds") or DEFAULT_INTERVAL_S)
    except (TypeError, ValueError, AttributeError):
        return DEFAULT_INTERVAL_S


def _emitter(body: kopf.Body) -> Emit:
    """Events for `kubectl describe`, and the same line in the operator's own log (Warnings at
    warning level), so its log tells what its Events tell."""
    meta = body.get("metadata") or {}
    where = f"{meta.get('namespace')}/{meta.get('name')}"

    def emit(kind: str, reason: str, message: str) -> None:
        level = logging.WARNING if kind == "Warning" else logging.INFO
        _log.log(level, "%s: %s: %s", where, reason, message[:1000])
        kopf.event(body, type=kind, reason=reason, message=message[:1000])

    return emit
