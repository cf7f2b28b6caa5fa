"""Shared test options, markers, the golden-file fixture and the network guard."""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import os
import socket
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from tests.support import REPO_ROOT, Golden

#: The Kubernetes test API: the imitation and the e2e cluster fixtures (tests/kube/README.md).
pytest_plugins = ("tests.kube.fixtures",)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden", action="store_true", help="rewrite tests/golden/** instead of comparing"
    )
    parser.addoption(
        "--run-cluster", action="store_true", help="run tests marked cluster (needs a kube context)"
    )
    parser.addoption(
        "--run-scenarios",
        action="store_true",
        help="run tests marked scenario: minutes-long real-vLLM scenarios (the operator's loop, "
        "the layered test bed's benchmark), kept out of the default run",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    opt_in = {
        "cluster": ("--run-cluster", "needs --run-cluster (a real Kubernetes context)"),
        "scenario": ("--run-scenarios", "a minutes-long real-vLLM scenario: --run-scenarios"),
    }
    for marker, (option, reason) in opt_in.items():
        if config.getoption(option):
            continue
        for item in items:
            if marker in item.keywords:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture
def golden(request: pytest.FixtureRequest) -> Golden:
    return Golden(
        REPO_ROOT / "tests" / "golden" / "data", bool(request.config.getoption("--update-golden"))
    )


@functools.cache
def _e2e_cluster_hosts() -> frozenset[str]:
    """The API server hosts of SPECDEPLOY_E2E_KUBECONFIG: the e2e suite's real cluster."""
    path = os.environ.get("SPECDEPLOY_E2E_KUBECONFIG")
    if not path:
        return frozenset()
    try:
        with open(path, encoding="utf-8") as file:
            config = yaml.safe_load(file.read()) or {}
    except (OSError, yaml.YAMLError):
        return frozenset()
    servers = [
        str((c.get("cluster") or {}).get("server", "")) for c in config.get("clusters") or []
    ]
    hosts = {urlsplit(s).hostname for s in servers}
    found = set()
    for host in hosts - {None}:
        found.add(str(host))
        with contextlib.suppress(OSError):
            found |= {str(info[4][0]) for info in socket.getaddrinfo(host, None)}
    return frozenset(found)


def _is_local(address: Any) -> bool:
    if isinstance(address, str):  # AF_UNIX path (e.g. the Docker socket)
        return True
    host = address[0] if isinstance(address, tuple) else address
    if host in ("localhost", "") or host in _e2e_cluster_hosts():
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@pytest.fixture(autouse=True)
def _no_network(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Tests talk to loopback only (and to the e2e suite's cluster, SPECDEPLOY_E2E_KUBECONFIG); a
    real cluster test opts out with the `cluster` marker."""
    if "cluster" in request.keywords:
        yield
        return
    real_connect = socket.socket.connect

    def guarded(self: socket.socket, address: Any) -> Any:
        if not _is_local(address):
            raise OSError(f"network access blocked in tests: {address!r}")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    yield


@pytest.fixture(autouse=True)
def _isolated_user_catalog(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A developer's own user catalog (~/.config/specdeploy/catalog.json) never leaks into a test:
    every test resolves against an empty one unless it records entries itself."""
    path = tmp_path_factory.mktemp("user-catalog") / "catalog.json"
    monkeypatch.setenv("SPECDEPLOY_CATALOG", str(path))
