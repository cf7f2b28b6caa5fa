"""A Service reached through the API server's service proxy, with the kubeconfig's credentials.

`GET|POST {server}/api/v1/namespaces/{namespace}/services/{name}:{port}/proxy/{path}` is served by
kube-apiserver itself: it resolves one ready endpoint of the Service and forwards the request to
it (`ProxyREST.Connect`,
https://github.com/kubernetes/kubernetes/blob/v1.36.0/pkg/registry/core/service/proxy.go, with
`ResolveEndpoint` in staging/src/k8s.io/apiserver/pkg/util/proxy/proxy.go; a Service without one
answers 503 `no endpoints available for service`). The proxy verb is long-running, so the
request timeout of ordinary calls does not cut a stream (pkg/controlplane/apiserver/config.go:
`BasicLongRunningRequestCheck` with the "proxy" verb and subresource), and streamed responses are passed on as they arrive (the `UpgradeAwareHandler` flushes
every 200 ms, staging/src/k8s.io/apimachinery/pkg/util/proxy/upgradeaware.go, and Go's reverse
proxy flushes `text/event-stream` at once, net/http/httputil/reverseproxy.go `flushInterval`). It
needs RBAC `get` and `create` on `services/proxy` in the namespace. No port-forward and no
network route to the pods is needed: whoever can apply can measure.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from orchestrator.deploy.kube.client import KubeClient


@dataclass(frozen=True)
class ProxiedService:
    """Where a Service answers through the API server, and how to authenticate there."""

    url: str
    """The proxy root: `{url}/v1/completions` reaches the Service's `/v1/completions`."""
    token: str | None = field(default=None, repr=False)
    """The bearer token of the kubeconfig user (None: a client certificate, or none)."""
    tls: ssl.SSLContext | None = field(default=None, repr=False)
    """Trust for the API server's certificate and the client certificate (None: plain http)."""


def proxied_service(client: KubeClient, namespace: str, service: str, port: str) -> ProxiedService:
    """The Service `service` (port name or number `port`) through `client`'s API server. The
    token is read now, so an exec plugin's or a refreshed token is the current one."""
    configuration = client.configuration
    root = str(configuration.host).rstrip("/")
    path = f"/api/v1/namespaces/{quote(namespace)}/services/{quote(service)}:{quote(port)}/proxy"
    return ProxiedService(root + path, bearer_token(client), _tls(configuration, root))


def bearer_token(client: KubeClient) -> str | None:
    """The bearer token `client` would send: its own auth settings (kubernetes 37 keeps a
    kubeconfig token under `BearerToken`, older releases under `authorization`), which run the
    refresh hook of an exec plugin or an expiring token first."""
    setting = client.configuration.auth_settings().get("BearerToken") or {}
    header = setting.get("value")
    if not header:
        return None
    scheme, _, token = str(header).partition(" ")
    return token if scheme.lower() == "bearer" and token else None


def _tls(configuration: Any, root: str) -> ssl.SSLContext | None:
    if not root.startswith("https://"):
        return None
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert or None)
    if not configuration.verify_ssl:  # the kubeconfig's insecure-skip-tls-verify: true
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file or None)
    return context
