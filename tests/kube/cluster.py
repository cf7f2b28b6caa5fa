"""One Kubernetes API for tests, two servers: the imitation (tests.kube.server) on loopback, or the
real cluster that `SPECDEPLOY_E2E_KUBECONFIG` names. Tests written against `Cluster` run
unchanged on both; what only the imitation can do (advance its controllers, inject faults, add
GPU nodes) is behind `Cluster.imitation` and skips on a real cluster.

See tests/kube/README.md for the fixture API.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import gzip
import json
import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.kube.server import Imitation, kubeconfig_text
from tests.support import REPO_ROOT

#: The kubeconfig of a real cluster to run the e2e suite against (kind, or any cluster where the
#: kubeconfig's user may create namespaces, CRDs, Roles and ServiceAccounts).
KUBECONFIG_ENV = "SPECDEPLOY_E2E_KUBECONFIG"
#: Where the referees are (platforms/, kube-apiserver/): $SPECDEPLOY_REFEREES, else
#: ../shared/referees relative to the repository root.
REFEREES = Path(os.environ.get("SPECDEPLOY_REFEREES") or REPO_ROOT.parent / "shared" / "referees")
PLATFORMS = REFEREES / "platforms"
RECORDING = REFEREES / "kube-apiserver" / "README.md"
FIELD_MANAGER = "specdeploy-e2e"

#: The published CRDs of each platform specdeploy renders for, under PLATFORMS
#: (../shared/referees/README.md lists their releases).
PLATFORM_CRDS: dict[str, tuple[str, ...]] = {
    "lws": ("lws/leaderworkerset.x-k8s.io_leaderworkersets.yaml",),
    "kserve": (
        "kserve/serving.kserve.io_llminferenceservices.yaml.gz",
        "kserve/serving.kserve.io_llminferenceserviceconfigs.yaml.gz",
        "kserve/serving.kserve.io_inferenceservices.yaml.gz",
        "kserve/serving.kserve.io_clusterservingruntimes.yaml.gz",
    ),
    "gateway-api": (
        "gateway-api/gateway.networking.k8s.io_httproutes.yaml",
        "gateway-api/gateway.networking.k8s.io_gateways.yaml",
        "gateway-api/gateway.networking.k8s.io_gatewayclasses.yaml",
        "gateway-api/gateway.networking.k8s.io_referencegrants.yaml",
    ),
    "gateway-api-inference-extension": (
        "gateway-api-inference-extension/inference.networking.k8s.io_inferencepools.yaml",
    ),
    "kaito": ("kaito/kaito.sh_workspaces.yaml", "kaito/kaito.sh_inferencesets.yaml"),
}
#: The operator chart, and the CRD it ships.
CHART = REPO_ROOT / "charts" / "specdeploy-operator"


def referee(relative: str) -> Path:
    """A file under the referees' platforms/ directory, or a skip that names it."""
    path = PLATFORMS / relative
    if not path.is_file():
        pytest.skip(f"{path} is absent (set SPECDEPLOY_REFEREES to the referees directory)")
    return path


def read_documents(path: Path) -> list[dict[str, Any]]:
    """The YAML documents of a file (gzip when it ends in .gz), C loader when there is one."""
    return copy.deepcopy(_documents(path))


@functools.cache
def _documents(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".gz":
        with gzip.open(path, "rt", encoding="utf-8") as file:
            text = file.read()
    else:
        text = path.read_text("utf-8")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return [d for d in yaml.load_all(text, Loader=loader) if isinstance(d, dict)]


class Cluster:
    """A Kubernetes API server for tests: `imitation` is set when it is the imitation."""

    def __init__(
        self, root: Path, imitation: Imitation | None = None, kubeconfig: Path | None = None
    ) -> None:
        self.root = root
        self.imitation = imitation
        if imitation is not None:
            self.kubeconfig = root / "admin.kubeconfig"
            self.kubeconfig.write_text(imitation.kubeconfig(), encoding="utf-8")
        else:
            assert kubeconfig is not None
            self.kubeconfig = kubeconfig
        self._installed_crds: list[str] = []
        #: Each CRD this object applied, as applied: the same one again is not re-applied (the
        #: cluster lives for the session; KServe's CRDs take seconds to apply and to establish).
        self._applied_crds: dict[str, str] = {}
        self._namespaces: list[str] = []
        self._client: Any = None
        self._dynamic: dict[str, Any] = {}

    @classmethod
    @contextlib.contextmanager
    def start(cls, root: Path, **imitation_options: Any) -> Iterator[Cluster]:
        """The real cluster of SPECDEPLOY_E2E_KUBECONFIG, else a new imitation; cleaned up after."""
        real = (
            None
            if imitation_options.pop("_force_imitation", False)
            else os.environ.get(KUBECONFIG_ENV)
        )
        if real:
            cluster = cls(root, kubeconfig=Path(real))
            try:
                yield cluster
            finally:
                cluster.clean_up()
            return
        imitation = Imitation(**imitation_options).serve()
        try:
            yield cls(root, imitation)
        finally:
            imitation.close()

    @property
    def real(self) -> bool:
        return self.imitation is None

    def need_imitation(self, why: str) -> Imitation:
        """The imitation, or a skip on a real cluster (for what only the imitation can do)."""
        if self.imitation is None:
            pytest.skip(f"needs the imitation: {why}")
        return self.imitation

    # -- clients -----------------------------------------------------------------------------

    def client(self, kubeconfig: Path | None = None) -> Any:
        """A `kubernetes` ApiClient for the admin kubeconfig (or another one)."""
        from kubernetes import config

        if kubeconfig is None and self._client is not None:
            return self._client
        made = config.new_client_from_config(config_file=str(kubeconfig or self.kubeconfig))
        if kubeconfig is None:
            self._client = made
        return made

    def resource(self, api_version: str, kind: str, kubeconfig: Path | None = None) -> Any:
        from kubernetes import dynamic
        from kubernetes.dynamic.exceptions import ResourceNotFoundError

        key = str(kubeconfig or "")
        if key not in self._dynamic:
            self._dynamic[key] = dynamic.DynamicClient(self.client(kubeconfig))
        try:
            return self._dynamic[key].resources.get(api_version=api_version, kind=kind)
        except ResourceNotFoundError:  # a kind served since discovery ran (a CRD just installed)
            self._dynamic[key] = dynamic.DynamicClient(self.client(kubeconfig))
            return self._dynamic[key].resources.get(api_version=api_version, kind=kind)

    def raw(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        query: dict[str, str] | None = None,
        kubeconfig: Path | None = None,
        anonymous: bool = False,
    ) -> tuple[int, Any]:
        """One HTTP request as sent (no client-side defaults): (status, decoded JSON body)."""
        import json
        from urllib.parse import urlencode

        from kubernetes.client.exceptions import ApiException

        api = self.client(kubeconfig)
        headers = {"Content-Type": content_type, "Accept": "application/json"}
        if not anonymous:
            api.update_params_for_auth(headers, [], ["BearerToken"], path, method, body)
        url = api.configuration.host + path + (f"?{urlencode(query)}" if query else "")
        rest = _anonymous_rest(api.configuration) if anonymous else api.rest_client
        try:
            answer = rest.request(method, url, headers=headers, body=body, _request_timeout=30)
            data = answer.read()
            text = data.decode() if isinstance(data, bytes) else data
            try:
                return answer.status, json.loads(text) if text else None
            except ValueError:
                return answer.status, text
        except ApiException as exc:
            try:
                return int(exc.status), json.loads(exc.body) if exc.body else None
            except ValueError:
                return int(exc.status), exc.body

    def apply(
        self,
        body: dict[str, Any],
        *,
        namespace: str | None = None,
        kubeconfig: Path | None = None,
        manager: str = FIELD_MANAGER,
        force: bool = True,
    ) -> dict[str, Any]:
        """Server-side apply one object (as the admin unless `kubeconfig` says otherwise)."""
        resource = self.resource(body["apiVersion"], body["kind"], kubeconfig)
        kwargs: dict[str, Any] = {"namespace": namespace} if resource.namespaced else {}
        done = resource.server_side_apply(
            body=body,
            name=body["metadata"]["name"],
            field_manager=manager,
            force_conflicts=force,
            **kwargs,
        )
        return dict(done.to_dict())

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> dict[str, Any] | None:
        from kubernetes.dynamic.exceptions import NotFoundError

        resource = self.resource(api_version, kind)
        kwargs: dict[str, Any] = {"namespace": namespace} if resource.namespaced else {}
        try:
            return dict(resource.get(name=name, **kwargs).to_dict())
        except NotFoundError:
            return None

    def list(
        self, api_version: str, kind: str, namespace: str | None = None, labels: str | None = None
    ) -> list[dict[str, Any]]:
        resource = self.resource(api_version, kind)
        kwargs: dict[str, Any] = (
            {"namespace": namespace} if resource.namespaced and namespace else {}
        )
        return list(resource.get(label_selector=labels, **kwargs).to_dict().get("items") or [])

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> None:
        from kubernetes.dynamic.exceptions import NotFoundError

        resource = self.resource(api_version, kind)
        kwargs: dict[str, Any] = {"namespace": namespace} if resource.namespaced else {}
        if kind == "CustomResourceDefinition":
            self._applied_crds.pop(name, None)  # installed again, it is applied again
        with contextlib.suppress(NotFoundError):
            resource.delete(name=name, **kwargs)

    def events(self, namespace: str, involved: str | None = None) -> list[dict[str, Any]]:
        """core/v1 Events in a namespace, of one object when `involved` names it."""
        items = self.list("v1", "Event", namespace)
        return [
            e
            for e in items
            if involved is None or (e.get("involvedObject") or {}).get("name") == involved
        ]

    # -- waiting -------------------------------------------------------------------------------

    def settle(self) -> None:
        """Let the controllers act now (the imitation); on a real cluster, nothing to do."""
        if self.imitation is not None:
            self.imitation.controllers.settle()

    def wait_for(
        self, what: str, check: Callable[[], Any], timeout: float = 60.0, interval: float = 0.2
    ) -> Any:
        """Poll `check` until it returns something truthy, or fail naming `what`."""
        deadline = time.monotonic() + timeout
        while True:
            found = check()
            if found:
                return found
            if time.monotonic() >= deadline:
                pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
            time.sleep(interval)

    # -- namespaces and identities -----------------------------------------------------------

    def namespace(self, prefix: str = "sd-e2e") -> str:
        """A new namespace, deleted (with everything in it) by `clean_up`."""
        name = f"{prefix}-{secrets.token_hex(3)}"
        self.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        self._namespaces.append(name)
        return name

    def service_account(
        self,
        namespace: str,
        name: str,
        rules: list[dict[str, Any]] | None = None,
        *,
        role_documents: list[dict[str, Any]] | None = None,
    ) -> Path:
        """A kubeconfig authenticating as ServiceAccount `namespace/name`, bound to a Role with
        `rules` (or to the Roles and bindings in `role_documents`, e.g. the operator chart's)."""
        self.apply(
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": name, "namespace": namespace},
            },
            namespace=namespace,
        )
        if rules is not None:
            self.apply(
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "Role",
                    "metadata": {"name": name, "namespace": namespace},
                    "rules": rules,
                },
                namespace=namespace,
            )
            self.apply(
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "RoleBinding",
                    "metadata": {"name": name, "namespace": namespace},
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "Role",
                        "name": name,
                    },
                    "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
                },
                namespace=namespace,
            )
        for doc in role_documents or []:
            self.apply(doc, namespace=doc["metadata"].get("namespace", namespace))
        return self._token_kubeconfig(namespace, name)

    def chart_identity(self, namespace: str) -> Path:
        """The operator chart's ServiceAccount, Role and RoleBinding for `namespace` (from
        `helm template charts/specdeploy-operator`), and its CRD; a kubeconfig as that account."""
        documents = helm_template(namespace)
        crds = [d for d in documents if d["kind"] == "CustomResourceDefinition"]
        self.install_crd_documents(crds)
        account = next(d for d in documents if d["kind"] == "ServiceAccount")
        rbac = [d for d in documents if d["kind"] in ("Role", "RoleBinding")]
        return self.service_account(namespace, account["metadata"]["name"], role_documents=rbac)

    def _token_kubeconfig(self, namespace: str, name: str) -> Path:
        from kubernetes import client

        core = client.CoreV1Api(self.client())
        request = client.AuthenticationV1TokenRequest(
            spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600)
        )
        token = core.create_namespaced_service_account_token(name, namespace, request).status.token
        path = self.root / f"{namespace}-{name}.kubeconfig"
        if self.imitation is not None:
            text = kubeconfig_text(self.imitation.url, token, namespace)
        else:
            text = _token_kubeconfig_text(self.kubeconfig, token, namespace)
        path.write_text(text, encoding="utf-8")
        return path

    # -- CRDs --------------------------------------------------------------------------------

    def install_platform_crds(self, *platforms: str) -> None:
        """The published CRDs of these platforms (PLATFORM_CRDS), from the referees directory
        (a skip naming the file where it is absent)."""
        documents = []
        for platform in platforms:
            for relative in PLATFORM_CRDS[platform]:
                documents += read_documents(referee(relative))
        self.install_crd_documents(
            [d for d in documents if d.get("kind") == "CustomResourceDefinition"]
        )

    def install_crd_documents(self, crds: list[dict[str, Any]]) -> None:
        """Install CRDs that are not there yet (a real cluster's own are left as they are), and
        wait until each is Established."""
        for crd in crds:
            name = crd["metadata"]["name"]
            if (
                self.real
                and self.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name)
                is not None
            ):
                continue
            applied = json.dumps(crd, sort_keys=True)
            if self._applied_crds.get(name) == applied:
                continue
            self.apply(crd)
            self._applied_crds[name] = applied
            if self.real:
                self._installed_crds.append(name)
            self.wait_for(
                f"CRD {name} to be Established",
                lambda n=name: _established(
                    self.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", n)
                ),
                timeout=60,
            )

    # -- cleaning up ---------------------------------------------------------------------------

    def clean_up(self) -> None:
        """Delete the namespaces and the CRDs this cluster object made (a real cluster only; an
        imitation goes away whole)."""
        for name in reversed(self._namespaces):
            self.delete("v1", "Namespace", name)
        for name in self._namespaces:
            with contextlib.suppress(BaseException):
                self.wait_for(
                    f"namespace {name} to go",
                    lambda n=name: self.get("v1", "Namespace", n) is None,
                    timeout=120,
                    interval=1,
                )
        for name in self._installed_crds:
            self.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition", name)
        self._namespaces.clear()
        self._installed_crds.clear()


def _anonymous_rest(configuration: Any) -> Any:
    """A REST client for the same server without credentials (no token, no client certificate)."""
    import copy

    from kubernetes.client import rest

    anonymous = copy.copy(configuration)
    anonymous.api_key = {}
    anonymous.cert_file = None
    anonymous.key_file = None
    return rest.RESTClientObject(anonymous)


def _established(crd: dict[str, Any] | None) -> bool:
    conditions = ((crd or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def _token_kubeconfig_text(admin: Path, token: str, namespace: str) -> str:
    """The admin kubeconfig's current cluster, with a token user instead of the admin."""
    config = yaml.safe_load(admin.read_text(encoding="utf-8"))
    current = config.get("current-context")
    context = next(c for c in config["contexts"] if c["name"] == current)["context"]
    cluster = next(c for c in config["clusters"] if c["name"] == context["cluster"])
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [cluster],
            "users": [{"name": "e2e-sa", "user": {"token": token}}],
            "contexts": [
                {
                    "name": "e2e-sa",
                    "context": {
                        "cluster": cluster["name"],
                        "user": "e2e-sa",
                        "namespace": namespace,
                    },
                }
            ],
            "current-context": "e2e-sa",
        }
    )


def helm_binary() -> str:
    found = REPO_ROOT / ".ci" / "bin" / "helm"
    if found.exists():
        return str(found)
    on_path = shutil.which("helm")
    if on_path is None:
        pytest.skip("helm is not installed (.ci/install-k8s-tools.sh)")
    return on_path


def helm_template(namespace: str, *sets: str) -> list[dict[str, Any]]:
    """`helm template` of the operator chart for one watched namespace, CRDs included."""
    home = Path(os.environ.get("TMPDIR", "/tmp")) / "specdeploy-helm-home"
    env = {
        **os.environ,
        **{
            v: str(home / v.lower())
            for v in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME")
        },
    }
    args = [
        helm_binary(),
        "template",
        "specdeploy",
        str(CHART),
        "--namespace",
        namespace,
        "--include-crds",
        "--set",
        f"watchNamespaces={{{namespace}}}",
    ]
    for value in sets:
        args += ["--set", value]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]
