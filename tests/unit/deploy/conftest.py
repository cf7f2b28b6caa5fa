"""Fixtures for deploy tests: a loopback fake Kubernetes API and a client pointed at it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer

from orchestrator.deploy.kubernetes_cluster import KubernetesCluster
from tests.unit.deploy.fake_kube import FakeKube


@pytest.fixture
def fake_kube(httpserver: HTTPServer) -> Iterator[FakeKube]:
    fake = FakeKube()
    httpserver.expect_request(re.compile(".*")).respond_with_handler(fake.handle)
    yield fake


@pytest.fixture
def cluster(httpserver: HTTPServer, fake_kube: FakeKube, tmp_path: Path) -> KubernetesCluster:
    from kubernetes import client

    configuration = client.Configuration()
    configuration.host = httpserver.url_for("").rstrip("/")
    return KubernetesCluster(namespace="default", api_client=client.ApiClient(configuration))
