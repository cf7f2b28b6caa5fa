"""Delete one profile's objects, found by its labels alone, in reverse apply order."""

from __future__ import annotations

from orchestrator.deploy.kube.client import KubeClient
from orchestrator.profile.schema import Metadata, Profile


def delete(
    client: KubeClient, profile: Profile | Metadata, namespace: str | None = None
) -> list[tuple[str, str]]:
    """Delete only objects labelled for this profile, in reverse apply order. Only the profile's
    metadata (name and namespace) is used, so a profile that no longer validates can still
    delete what it applied (`load_metadata`)."""
    metadata = profile.metadata if isinstance(profile, Profile) else profile
    namespace = metadata.namespace or namespace or client.namespace
    selector = client.selector(metadata)
    deleted: list[tuple[str, str]] = []
    for managed in reversed(client.kinds):
        kind = managed.kind
        items = client.list_items(managed.api_version, kind, namespace, selector, optional=True)
        if not items:
            continue
        resource = client.resource(managed.api_version, kind)
        for item in items:
            name = item["metadata"]["name"]
            with client.calling(f"delete {kind}/{name} in namespace {namespace}"):
                resource.delete(name=name, namespace=namespace, _request_timeout=client.timeout)
            deleted.append((kind, name))
    return deleted
