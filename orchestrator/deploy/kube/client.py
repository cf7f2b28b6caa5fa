"""The connection to one cluster: kubeconfig and context, discovery, reads and lists, and a
deadline on every request.

Uses the `kubernetes` client, imported only inside `KubeClient.__init__` so that commands that
never talk to a cluster do not pay for it. Every request has a budget of the request timeout:
each attempt has that deadline (connect and each read), so an API server that accepts connections
and never answers fails within it, and transient answers (429, 503, 504, a connection reset) are
retried with exponential backoff, honouring Retry-After, while the budget lasts (`Retrying`).
Cluster failures become DeployError (exit 6) with what, why and fix (`errors`).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

from orchestrator.deploy.kube.errors import TRANSIENT_STATUS, Subject, cluster_error, missing_api
from orchestrator.deploy.kube.kubeconfig import context_namespace, kubeconfig_path
from orchestrator.emitters.base import EMITTERS, Manifest, ResourceKind
from orchestrator.errors import DeployError
from orchestrator.manifests.context import name_selector
from orchestrator.profile.schema import Metadata, Profile

#: Seconds each API request may take (connect and each read) before the call fails.
REQUEST_TIMEOUT_S: Final = 30.0
#: First wait between two attempts of a request, doubled each time up to BACKOFF_MAX_S (client-go's
#: rest client backs off the same way; a Retry-After the server sends wins).
BACKOFF_FIRST_S: Final = 0.25
BACKOFF_MAX_S: Final = 4.0


class KubeClient:
    """One cluster context and default namespace; all calls go through `calling`."""

    def __init__(
        self,
        *,
        context: str | None = None,
        namespace: str | None = None,
        api_client: Any = None,
        kinds: tuple[ResourceKind, ...] | None = None,
        request_timeout: float = REQUEST_TIMEOUT_S,
    ) -> None:
        from kubernetes import client, config, dynamic  # the one allowed deferred import

        self.exceptions = _exception_types()
        self.retrying: Retrying | None = None
        self.kinds = kinds if kinds is not None else EMITTERS["kubernetes"].kinds
        self.timeout = request_timeout
        if api_client is None:
            with self.calling("load the kubeconfig", kubeconfig=True):
                api_client = config.new_client_from_config(  # type: ignore[no-untyped-call]
                    config_file=kubeconfig_path(), context=context
                )
        self.server = str(api_client.configuration.host)
        self.configuration: Any = api_client.configuration
        """How this client reaches and authenticates to the API server (`proxy` reuses it)."""
        self.retrying = Retrying.bind(api_client, request_timeout)
        self.namespace = namespace or context_namespace(config, context) or "default"
        with self.calling(f"reach the API server at {self.server}"):
            self._cache_dir = tempfile.TemporaryDirectory(prefix="specdeploy-discovery-")
            cache_file = str(Path(self._cache_dir.name) / "discovery.json")
            self._dynamic = dynamic.DynamicClient(api_client, cache_file=cache_file)  # type: ignore[no-untyped-call]
            self.core = client.CoreV1Api(api_client)

    # -- reading and status (the operator) -----------------------------------------------------

    def require(self, api_version: str, kind: str) -> None:
        """DeployError when the cluster does not serve this kind."""
        self.resource(api_version, kind)

    def live(self, manifest: Manifest) -> dict[str, Any] | None:
        """The object as the cluster has it now, or None."""
        namespace = manifest.namespace or self.namespace
        resource = self.resource(manifest.api_version, manifest.kind)
        with self.calling(f"read {manifest.kind}/{manifest.name} in namespace {namespace}"):
            return self.get_object(resource, manifest.name, namespace)

    def delete_object(self, manifest: Manifest, uid: str) -> bool:
        """Delete one object if it is still the one with this `uid` (a precondition: an object
        recreated under the same name by someone else is left alone); False when it is gone."""
        from kubernetes.dynamic.exceptions import ConflictError, NotFoundError

        namespace = manifest.namespace or self.namespace
        resource = self.resource(manifest.api_version, manifest.kind)
        options = {"preconditions": {"uid": uid}, "propagationPolicy": "Background"}
        with self.calling(f"delete {manifest.kind}/{manifest.name} in namespace {namespace}"):
            try:
                resource.delete(
                    name=manifest.name,
                    namespace=namespace,
                    body={"apiVersion": "v1", "kind": "DeleteOptions", **options},
                    _request_timeout=self.timeout,
                )
            except (NotFoundError, ConflictError):
                return False
        return True

    def list_objects(
        self, api_version: str, kind: str, namespace: str, labels: dict[str, str]
    ) -> list[dict[str, Any]]:
        """Objects of one kind carrying all `labels`."""
        selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
        return self.list_items(api_version, kind, namespace, selector, optional=True)

    def patch_status(
        self, api_version: str, kind: str, name: str, namespace: str, status: dict[str, Any]
    ) -> None:
        """Merge-patch an object's status subresource."""
        resource = self.resource(api_version, kind)
        with self.calling(f"update the status of {kind}/{name} in namespace {namespace}"):
            resource.status.patch(
                body={"status": status},
                name=name,
                namespace=namespace,
                content_type="application/merge-patch+json",
                _request_timeout=self.timeout,
            )

    def selector(self, profile: Profile | Metadata) -> str:
        """The label selector of one profile's objects (its metadata.name is all it needs)."""
        metadata = profile.metadata if isinstance(profile, Profile) else profile
        return ",".join(f"{k}={v}" for k, v in sorted(name_selector(metadata.name).items()))

    def resource(self, api_version: str, kind: str) -> Any:
        from kubernetes.dynamic.exceptions import ResourceNotFoundError

        try:
            with self.calling(f"discover {kind} ({api_version})"):
                return self._dynamic.resources.get(api_version=api_version, kind=kind)
        except DeployError as exc:
            if not isinstance(exc.__cause__, ResourceNotFoundError):
                raise
            raise missing_api(self.server, api_version, kind) from exc.__cause__

    def get_object(self, resource: Any, name: str, namespace: str) -> dict[str, Any] | None:
        from kubernetes.dynamic.exceptions import NotFoundError

        try:
            found = resource.get(name=name, namespace=namespace, _request_timeout=self.timeout)
            return dict(found.to_dict())
        except NotFoundError:
            return None

    def list_items(
        self,
        api_version: str,
        kind: str,
        namespace: str,
        selector: str | None,
        *,
        field_selector: str | None = None,
        optional: bool = False,
    ) -> list[dict[str, Any]]:
        try:
            resource = self.resource(api_version, kind)
        except DeployError:
            if optional:  # e.g. no LeaderWorkerSet CRD: nothing of that kind can exist
                return []
            raise
        with self.calling(f"list {kind} in namespace {namespace}"):
            listing = resource.get(
                namespace=namespace,
                label_selector=selector,
                field_selector=field_selector,
                _request_timeout=self.timeout,
            ).to_dict()
        return list(listing.get("items") or [])

    @contextmanager
    def calling(
        self, what: str, *, kubeconfig: bool = False, subject: Subject | None = None
    ) -> Iterator[None]:
        try:
            yield
        except DeployError:
            raise
        except Exception as exc:
            attempts = self.retrying.attempts if self.retrying is not None else 1
            raise cluster_error(
                what, exc, kubeconfig=kubeconfig, subject=subject, attempts=attempts
            ) from exc


class Retrying:
    """Every request of one client within a budget of `timeout` seconds: each attempt has that
    deadline (connect and each read; the client's own default waits forever on an API server
    that accepts and never answers), and a transient answer is tried again after a backoff while
    the budget lasts. urllib3's own retries are off (it would retry a failed connection three
    times, outside the budget).

    Transient: 429, 503 and 504 answers, and a connection reset or aborted once the API server
    has answered this client (a refused first connection means nothing listens there, and fails
    at once). Never retried: a timeout (the budget is spent), other answers (a typed-patch 500
    and every 4xx are client errors, the recording)."""

    def __init__(
        self,
        timeout: float,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.timeout = timeout
        self.attempts = 0
        """Attempts of the last request."""
        self.reached = False
        """The API server has answered this client at least once."""
        self._sleep, self._clock = sleep, clock

    @classmethod
    def bind(cls, api_client: Any, timeout: float) -> Retrying:
        import urllib3

        retrying = cls(timeout)
        rest = api_client.rest_client
        rest.pool_manager.connection_pool_kw["retries"] = urllib3.Retry(total=0, redirect=False)
        send = rest.request

        def request(*args: Any, _request_timeout: Any = None, **kwargs: Any) -> Any:
            return retrying.call(send, args, kwargs, _request_timeout)

        rest.request = request
        return retrying

    def call(
        self, send: Callable[..., Any], args: Any, kwargs: dict[str, Any], per_attempt: Any
    ) -> Any:
        deadline = self._clock() + self.timeout
        per_attempt = per_attempt or (self.timeout, self.timeout)
        self.attempts = 0
        while True:
            self.attempts += 1
            try:
                response = send(*args, _request_timeout=per_attempt, **kwargs)
            except Exception as exc:
                wait = self._backoff()
                if not (self.reached and _reset(exc)) or self._clock() + wait >= deadline:
                    raise
            else:
                self.reached = True
                status = getattr(response, "status", 200)
                if status not in TRANSIENT_STATUS:
                    return response
                wait = _retry_after(response) or self._backoff()
                if self._clock() + wait >= deadline:
                    return response  # the caller raises it, with self.attempts
                response.read()  # drain it, so the connection goes back to the pool
            self._sleep(wait)
            left = max(deadline - self._clock(), 0.001)
            per_attempt = (min(self.timeout, left), min(self.timeout, left))

    def _backoff(self) -> float:
        return float(min(BACKOFF_FIRST_S * 2 ** (self.attempts - 1), BACKOFF_MAX_S))


def _retry_after(response: Any) -> float | None:
    """Seconds of a Retry-After header (the API server sends whole seconds), else None."""
    headers = getattr(response, "headers", None) or {}
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    try:
        return max(float(value), 0.0) if value is not None else None
    except ValueError:
        return None


def _reset(exc: BaseException) -> bool:
    """A connection reset, aborted or refused mid-session, however urllib3 wrapped it."""
    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None:
            return False
        if isinstance(seen, TimeoutError) or "Timeout" in type(seen).__name__:
            return False
        if isinstance(
            seen, ConnectionResetError | ConnectionAbortedError | BrokenPipeError
        ) or type(seen).__name__ in ("ProtocolError", "RemoteDisconnected"):
            return True
        if isinstance(seen, ConnectionRefusedError) or "Connection refused" in str(seen):
            return True
        reason = getattr(seen, "reason", None)
        seen = (
            (reason if isinstance(reason, BaseException) else None)
            or seen.__cause__
            or seen.__context__
        )
    return False


def _exception_types() -> tuple[type[BaseException], ...]:
    from kubernetes.client.exceptions import ApiException

    return (ApiException, OSError)
