"""Every name and namespace the API server limits is checked at `validate` (exit 3), before any
object is applied: the recording (../shared/referees/kube-apiserver/README.md) has the server
refuse an HTTPRoute whose parentRefs[0].namespace is 70 characters with a 422, after 4 of 5
objects were applied. And every name specdeploy derives from metadata.name fits the limit of
its kind when metadata.name is as long as validate allows."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.emitters.base import EMITTERS
from orchestrator.errors import OrchestratorError
from orchestrator.profile.schema import MAX_NAME_LENGTH
from tests.support import write_profile
from tests.unit.manifests.conftest import valid_plan

SPLIT = {"baseline": True, "baseline_traffic_percent": 10}
DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def validate(tmp_path: Path, **sections: object) -> tuple[int, str]:
    result = CliRunner().invoke(
        cli, ["validate", str(write_profile(tmp_path, **sections)), "--offline"]
    )
    return result.exit_code, result.output


@pytest.mark.parametrize(
    ("sections", "field"),
    [
        ({"deploy": {**SPLIT, "gateway": f"{'a' * 70}/gw"}}, "deploy.gateway"),
        ({"deploy": {**SPLIT, "gateway": "g" * 254}}, "deploy.gateway"),
        (
            {"policy": {"gateway": {"name": "gw", "namespace": "a" * 64}}},
            "policy.gateway.namespace",
        ),
        ({"metadata": {"name": "ok", "namespace": "n" * 64}}, "metadata.namespace"),
        ({"metadata": {"name": "a" * (MAX_NAME_LENGTH + 1)}}, "metadata.name"),
        ({"metadata": {"name": "9lives"}}, "metadata.name"),
        ({"deploy": {"hf_token_secret": "s" * 254}}, "deploy.hf_token_secret"),
        ({"deploy": {"model_cache": {"storage_class": "S_C"}}}, "deploy.model_cache.storage_class"),
    ],
)
def test_a_name_the_server_would_refuse_is_refused_at_validate(
    tmp_path: Path, sections: dict[str, Any], field: str
) -> None:
    code, output = validate(tmp_path, **sections)
    assert code == 3, output
    assert f"{field}:" in output


def test_a_63_byte_gateway_namespace_is_accepted(tmp_path: Path) -> None:
    code, output = validate(tmp_path, deploy={**SPLIT, "gateway": f"{'a' * 63}/gw"})
    assert code == 0, output


def test_a_too_long_name_names_the_derived_name(tmp_path: Path) -> None:
    name = "a" * (MAX_NAME_LENGTH + 1)
    code, output = validate(tmp_path, metadata={"name": name})
    assert code == 3 and f"{name}-baseline-leader" in output and "metadata.name" in output


@pytest.mark.parametrize("tensor_parallel_size", [1, 16])  # a Deployment, or a LeaderWorkerSet
def test_every_derived_name_fits_its_kind_at_the_longest_metadata_name(
    tmp_path: Path, tensor_parallel_size: int
) -> None:
    name = "a" * MAX_NAME_LENGTH
    plan = valid_plan(
        write_profile(
            tmp_path,
            metadata={"name": name, "namespace": "n" * 63},
            hardware={"gpu": "H100-80GB", "tensor_parallel_size": tensor_parallel_size},
            deploy={**SPLIT, "gateway": "infra/gw", "model_cache": {"size": "100Gi"}},
        )
    )
    checked = 0
    for platform, emitter in EMITTERS.items():
        try:
            manifests = emitter.emit(plan)
        except OrchestratorError:  # a platform that cannot run this profile renders nothing
            continue
        for manifest in manifests:
            if not isinstance(manifest.body, dict) or "metadata" not in manifest.body:
                continue
            where = f"{platform}: {manifest.kind}/{manifest.name}"
            if manifest.kind == "Service":  # a DNS-1035 label
                assert len(manifest.name) <= 63 and DNS1035_LABEL.fullmatch(manifest.name), where
            else:
                assert len(manifest.name) <= 253, where
                assert DNS1123_SUBDOMAIN.fullmatch(manifest.name), where
            labels = manifest.body["metadata"].get("labels") or {}
            assert all(len(str(v)) <= 63 for v in labels.values()), where
            checked += 1
    assert checked
