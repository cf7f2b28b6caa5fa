"""run --docker against a real Docker daemon with the locally built fake engine image
(.ci/install-k8s-tools.sh docker). Skips cleanly when there is no daemon or no image."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from orchestrator.errors import DeployError
from tests.support import write_profile
from tests.unit.manifests.conftest import valid_plan

pytestmark = pytest.mark.docker
IMAGE = "specdeploy-test/fake-engine:1"


@pytest.fixture(scope="module")
def docker_client():  # type: ignore[no-untyped-def]
    docker = pytest.importorskip("docker")
    try:
        client = docker.from_env()
        client.ping()
        client.images.get(IMAGE)
    except Exception as exc:  # no daemon, or image not built
        pytest.skip(f"needs a Docker daemon and {IMAGE} (.ci/install-k8s-tools.sh docker): {exc}")
    return client


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def plan_for(tmp_path: Path, *extra: str):  # type: ignore[no-untyped-def]
    return valid_plan(
        write_profile(
            tmp_path,
            metadata={"name": f"docker-test-{free_port()}"},
            engine={"name": "vllm", "version": "0.32.0", "image": IMAGE},
            hardware={"device": "cpu"},
            serving={"port": free_port(), "extra_args": list(extra)},
        )
    )


def test_runs_waits_for_health_and_labels(docker_client, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from orchestrator.deploy.local_docker import run_docker, stop

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    lines: list[str] = []
    run = run_docker(plan_for(tmp_path), echo=lines.append, detach=True, health_timeout=30)
    container = docker_client.containers.get(run.container_id)
    try:
        assert container.labels["app.kubernetes.io/managed-by"] == "specdeploy"
        assert container.attrs["HostConfig"]["ShmSize"] == 2 * 1024**3
        assert any(line.startswith("ready: http://127.0.0.1:") for line in lines)
    finally:
        stop(container)


def test_failure_streams_logs_and_exits_6(docker_client, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from orchestrator.deploy.local_docker import run_docker

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    lines: list[str] = []
    with pytest.raises(DeployError) as err:
        run_docker(plan_for(tmp_path, "--fake-fail"), echo=lines.append, health_timeout=30)
    assert err.value.exit_code == 6
    assert "failing on purpose" in err.value.why
    assert any("failing on purpose" in line for line in lines)
