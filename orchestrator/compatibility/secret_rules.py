"""Secret rules: a credential typed into the profile would be written in plain text to every
output (launch.json, the Deployment's args, the Helm values, the audit annotations)."""

from __future__ import annotations

import re

from orchestrator.compatibility.rule import CompatContext, Finding, rule
from orchestrator.compatibility.unchecked import at_field

_WHY = (
    "render writes it in plain text to launch.json, the Deployment's container args and the "
    "Helm values, where anyone who can read the manifests, the pod spec "
    "(`kubectl get pod -o yaml`) or CI artifacts can use it"
)
_FIX = (
    "remove it and rotate it; keep credentials in a Kubernetes Secret: deploy.hf_token_secret "
    "names one whose HF_TOKEN the pod reads (vLLM also reads its API key from VLLM_API_KEY "
    "instead of --api-key)"
)
# An OCI digest ends an image reference: "repo@sha256:<hex>" (opencontainers image-spec
# descriptor.md, "Digests"). Any other '@' in a reference is a user name.
_DIGEST = re.compile(r"@[a-z0-9]+(?:[+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$")


@rule(
    "serving.secret-in-args",
    source="Kubernetes: Secrets are the place for credentials, not a Pod's command or args "
    "(https://github.com/kubernetes/website/blob/7dae226a96f9cb3f8a91d67cf2d89e2ca7b45788/content/"
    "en/docs/concepts/configuration/secret.md#L16-L19: 'safer and more flexible than putting it "
    "verbatim in a Pod definition'); token formats in orchestrator/redaction.py TOKEN_KINDS, "
    "each with its own source",
)
def no_secret_in_args(ctx: CompatContext) -> list[Finding]:
    """A Hugging Face token, an API key after `--api-key`/`--hf-token`, or `user:password@` in
    the image, written into serving.extra_args or engine.image, ends up in plain text in every
    rendered file and in the pod spec. An error, not a warning: the engine would run, but the
    credential leaks the moment the output is committed, uploaded as a CI artifact or applied,
    and DESIGN's rule is that secrets are referenced, never inlined (deploy.hf_token_secret)."""
    found = []
    args = ctx.profile.serving.extra_args
    for index in range(len(args)):
        kind = _credential_in_arg(args, index)
        if kind is not None:
            found.append(_finding(f"serving.extra_args[{index}]", kind, args[index]))
    image = ctx.profile.engine.image
    if image is not None:
        kind = _credential_in_image(image)
        if kind is not None:
            found.append(_finding("engine.image", kind, image))
    return found


def _credential_in_arg(args: tuple[str, ...], index: int) -> str | None:
    from orchestrator.redaction import find_token, secret_flag_value  # only when args are set

    value = secret_flag_value(args, index)
    if value is not None:
        return f"the value of {args[index].split('=', 1)[0]}"
    token = find_token(args[index])
    if token is not None and not (index > 0 and secret_flag_value(args, index - 1)):
        return token.name
    return None


def _credential_in_image(image: str) -> str | None:
    from orchestrator.redaction import USERINFO, find_token  # only when engine.image is set

    if "@" in _DIGEST.sub("", image) and USERINFO.search(image):
        return "a user name and password (user:password@registry)"
    token = find_token(image)
    return token.name if token is not None else None


def _finding(field: str, kind: str, value: str) -> Finding:
    return at_field(
        field.split("[", 1)[0],
        Finding.error(
            what=f"{field} holds {kind} (the value is not repeated here; {len(value)} characters)",
            why=_WHY,
            fix=_FIX,
        ),
    )


RULES = (no_secret_in_args,)
