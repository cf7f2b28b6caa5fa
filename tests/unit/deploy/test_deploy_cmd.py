"""The apply/status/delete commands through click, against the loopback fake API server."""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner
from pytest_httpserver import HTTPServer

from orchestrator.cli import deploy_cmd
from tests.support import REPO_ROOT, write_profile
from tests.unit.deploy.fake_kube import FakeKube

PROFILE = REPO_ROOT / "profiles" / "vllm-qwen3-8b-ngram.yaml"


def kubeconfig(tmp_path: Path, server: str) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "fake", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {"token": "not-a-secret"}}],
                "contexts": [
                    {
                        "name": "fake",
                        "context": {"cluster": "fake", "user": "u", "namespace": "team"},
                    }
                ],
                "current-context": "fake",
            }
        )
    )
    return path


def test_apply_twice_status_delete(
    httpserver: HTTPServer, fake_kube: FakeKube, tmp_path: Path
) -> None:
    env = {"KUBECONFIG": str(kubeconfig(tmp_path, httpserver.url_for("").rstrip("/")))}
    runner = CliRunner()
    first = runner.invoke(deploy_cmd.apply, [str(PROFILE), "--offline"], env=env)
    assert first.exit_code == 0, first.output
    assert "deployment/qwen3-8b-ngram created" in first.output
    assert ("apis/apps/v1", "deployments", "team", "qwen3-8b-ngram") in fake_kube.objects
    second = runner.invoke(deploy_cmd.apply, [str(PROFILE), "--offline"], env=env)
    assert "deployment/qwen3-8b-ngram unchanged" in second.output
    shown = runner.invoke(deploy_cmd.status, [str(PROFILE)], env=env)
    assert "Deployment/qwen3-8b-ngram: 0/1 ready" in shown.output
    assert shown.exit_code == 8, shown.output  # not ready: docs/cli.md
    gone = runner.invoke(deploy_cmd.delete, [str(PROFILE)], env=env)
    assert "deployment/qwen3-8b-ngram deleted" in gone.output
    assert fake_kube.objects == {}


def test_cluster_refusal_exits_6_without_traceback(
    httpserver: HTTPServer, fake_kube: FakeKube, tmp_path: Path
) -> None:
    from orchestrator.cli import cli

    cli.add_command(deploy_cmd.apply)
    fake_kube.refuse["/services/"] = 403
    env = {"KUBECONFIG": str(kubeconfig(tmp_path, httpserver.url_for("").rstrip("/")))}
    result = CliRunner().invoke(cli, ["apply", str(PROFILE), "--offline"], env=env)
    assert result.exit_code == 6
    assert "fix:" in result.output and "Traceback" not in result.output


def test_missing_kubeconfig_exits_6(tmp_path: Path) -> None:
    from orchestrator.cli import cli

    cli.add_command(deploy_cmd.status)
    profile = write_profile(tmp_path)
    env = {"KUBECONFIG": str(tmp_path / "absent")}
    result = CliRunner().invoke(cli, ["status", str(profile)], env=env)
    assert result.exit_code == 6, result.output
    assert "kube" in result.output.lower() and "Traceback" not in result.output


def test_apply_refuses_fields_another_manager_owns_until_forced(
    httpserver: HTTPServer, fake_kube: FakeKube, tmp_path: Path
) -> None:
    from orchestrator.cli import cli

    env = {"KUBECONFIG": str(kubeconfig(tmp_path, httpserver.url_for("").rstrip("/")))}
    runner = CliRunner()
    assert runner.invoke(cli, ["apply", str(PROFILE), "--offline"], env=env).exit_code == 0
    key = ("apis/apps/v1", "deployments", "team", "qwen3-8b-ngram")
    fake_kube.update(key, "spec.replicas", 5, manager="kubectl-scale")
    refused = runner.invoke(cli, ["apply", str(PROFILE), "--offline"], env=env)
    assert refused.exit_code == 6, refused.output
    assert '"kubectl-scale"' in refused.output and "--force-conflicts" in refused.output
    # Objects before the Deployment landed and say so, one line each, before the error.
    assert "service/qwen3-8b-ngram unchanged" in refused.output
    forced = runner.invoke(cli, ["apply", str(PROFILE), "--offline", "--force-conflicts"], env=env)
    assert forced.exit_code == 0, forced.output
    assert "deployment/qwen3-8b-ngram configured" in forced.output
    assert fake_kube.objects[key]["spec"]["replicas"] == 1
