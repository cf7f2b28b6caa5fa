"""Local Docker target: run a plan's in-container launch with the docker SDK and wait for health.

GPUs by device request (TP x PP of them), /dev/shm sized as in the manifests, the port published
on 127.0.0.1, the Hugging Face cache and local model directories mounted, specdeploy labels. The
docker SDK is imported only inside `run_docker`. Daemon failures are DeployError (exit 6).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from orchestrator.engines import ENGINES
from orchestrator.engines.base import EngineLaunch
from orchestrator.errors import DeployError
from orchestrator.manifests.context import HF_CACHE_DIR, HF_TOKEN_KEY, profile_selector
from orchestrator.plan.types import CONTAINER_DRAFT_DIR, CONTAINER_TARGET_DIR, DeploymentPlan

LOG_TAIL_LINES: Final = 30
#: Kubernetes quantity suffix -> docker's shm_size suffix.
_SHM_UNITS: Final = {"Gi": "g", "Mi": "m"}


@dataclass(frozen=True)
class DockerRun:
    """A started engine container."""

    container_id: str
    name: str
    url: str


def run_docker(
    plan: DeploymentPlan,
    *,
    echo: Callable[[str], None],
    detach: bool = False,
    host_port: int | None = None,
    health_timeout: float = 1800.0,
    baseline: bool = False,
) -> DockerRun:
    """Start the engine container, wait until its health path answers 200, then either return
    (detach) or stream its logs until Ctrl-C, which stops and removes it."""
    import docker  # the one allowed deferred import
    from docker.errors import DockerException

    launch = plan.launch_for(container=True, baseline=baseline)
    try:
        client = docker.from_env()
        client.ping()
    except DockerException as exc:
        raise DeployError(
            "cannot reach the Docker daemon",
            why=str(exc).splitlines()[0] if str(exc) else "no answer on DOCKER_HOST",
            fix="start Docker (dockerd) or set DOCKER_HOST; `docker info` must work",
        ) from exc
    port = host_port or launch.port
    name = f"specdeploy-{plan.profile.metadata.name}" + ("-baseline" if baseline else "")
    config_dir = tempfile.mkdtemp(prefix="specdeploy-config-")
    try:
        container = client.containers.run(
            **_run_arguments(plan, launch, name, port, Path(config_dir)), detach=True
        )
    except DockerException as exc:
        raise DeployError(
            f"Docker refused to start {launch.image}",
            why=str(exc),
            fix="check engine.image (locally built or pullable) and that the port is free",
        ) from exc
    url = f"http://127.0.0.1:{port}"
    echo(
        f"started {name} ({container.short_id}) from {launch.image}; waiting for {url}{launch.health_path}"
    )
    _wait_healthy(container, f"{url}{launch.health_path}", health_timeout, echo)
    echo(f"ready: {url} (OpenAI-compatible API)")
    if detach:
        return DockerRun(container.id, name, url)
    try:
        for chunk in container.logs(stream=True, follow=True):
            echo(chunk.decode(errors="replace").rstrip("\n"))
    except KeyboardInterrupt:
        echo(f"stopping {name}")
    finally:
        stop(container)
    return DockerRun(container.id, name, url)


def stop(container: Any) -> None:
    """Stop and remove a container, ignoring one that is already gone."""
    from docker.errors import DockerException

    with contextlib.suppress(DockerException):
        container.stop(timeout=10)
    with contextlib.suppress(DockerException):
        container.remove(force=True)


def _run_arguments(
    plan: DeploymentPlan, launch: EngineLaunch, name: str, port: int, config_dir: Path
) -> dict[str, Any]:
    from docker.types import DeviceRequest

    profile = plan.profile
    hardware = profile.hardware
    volumes = {_hf_cache(): {"bind": HF_CACHE_DIR, "mode": "rw"}}
    for location, mount in (
        (plan.target_location, CONTAINER_TARGET_DIR),
        (plan.draft_location, CONTAINER_DRAFT_DIR),
    ):
        if location is not None and location.local_dir is not None:
            volumes[str(location.local_dir)] = {"bind": mount, "mode": "ro"}
    if launch.config_files:
        for filename, content in launch.config_files.items():
            (config_dir / filename).write_text(content, encoding="utf-8")
        volumes[str(config_dir)] = {"bind": launch.config_dir, "mode": "ro"}
    env = dict(launch.env)
    if os.environ.get(HF_TOKEN_KEY):  # passed through from the caller's environment, never printed
        env[HF_TOKEN_KEY] = os.environ[HF_TOKEN_KEY]
    devices = []
    if hardware.device == "gpu":
        devices = [DeviceRequest(count=hardware.gpus_per_replica, capabilities=[["gpu"]])]
    shm = ENGINES[launch.engine].shm_size
    return {
        "image": launch.image,
        "entrypoint": [launch.argv[0]],
        "command": list(launch.argv[1:]),
        "name": name,
        "environment": env,
        "ports": {f"{launch.port}/tcp": ("127.0.0.1", port)},
        "volumes": volumes,
        "device_requests": devices,
        "shm_size": shm[:-2] + _SHM_UNITS[shm[-2:]],
        "labels": {**profile_selector(profile), "specdeploy.io/engine": launch.engine},
    }


def _hf_cache() -> str:
    home = os.environ.get("HF_HOME")
    path = Path(home) if home else Path("~/.cache/huggingface").expanduser()
    path.mkdir(parents=True, exist_ok=True)
    return str(path)


def _wait_healthy(container: Any, url: str, timeout: float, echo: Callable[[str], None]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        container.reload()
        if container.status in ("exited", "dead"):
            code = container.attrs.get("State", {}).get("ExitCode")
            raise _failed(container, f"the engine container exited with code {code}", echo)
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(1.0)
    raise _failed(container, f"{url} did not answer 200 within {timeout:.0f} s", echo)


def _failed(container: Any, what: str, echo: Callable[[str], None]) -> DeployError:
    logs = container.logs(tail=LOG_TAIL_LINES).decode(errors="replace").splitlines()
    for line in logs:
        echo(f"  | {line}")
    stop(container)
    return DeployError(
        what,
        why="last log lines:\n" + "\n".join(f"  | {line}" for line in logs[-LOG_TAIL_LINES:]),
        fix="fix what the engine logged (often serving.extra_args, the model or memory), "
        "then run again",
    )
