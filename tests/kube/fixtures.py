"""pytest fixtures of the Kubernetes test API (registered in tests/conftest.py); see README.md."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kube.cluster import Cluster


@pytest.fixture(scope="session")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The e2e suite's cluster for the whole session: the real one SPECDEPLOY_E2E_KUBECONFIG
    names, else the imitation. Tests isolate themselves with `kube_namespace`."""
    with Cluster.start(tmp_path_factory.mktemp("kube")) as cluster:
        yield cluster


@pytest.fixture
def kube_namespace(kube: Cluster) -> Iterator[str]:
    """A fresh namespace of `kube`, deleted after the test with everything in it."""
    name = kube.namespace()
    yield name
    kube.delete("v1", "Namespace", name)


@pytest.fixture
def imitation(tmp_path: Path) -> Iterator[Cluster]:
    """A fresh imitation of its own (never a real cluster): for tests of one behaviour of the API
    server that set up its nodes, faults or controllers."""
    with Cluster.start(tmp_path, _force_imitation=True) as cluster:
        yield cluster


def kubeconfig_env(path: Path) -> dict[str, str]:
    """The environment a `specdeploy` command needs to use this kubeconfig."""
    return {"KUBECONFIG": str(path)}
