"""What a platform team allows its tenants' resources to name: images and Secrets.

A tenant who may create a SpeculativeDeployment but not Pods or Secrets would otherwise get a pod
running an image of their choice with the namespace's service-account token, and the `HF_TOKEN`
key of any Secret they name. The operator's admins set two lists (the chart's
`admission.allowedImages` and `admission.allowedSecrets`, or the `--allow-image` and
`--allow-secret` flags, which reach the operator as the environment variables below):

* images: `engine.image` must match one of the patterns (shell globs over the whole reference,
  e.g. `registry.example.com/*` or `vllm/vllm-openai:v0.3*`). A resource that names no image gets
  the engine's official image for its `engine.version`, which is always allowed; with no patterns
  set, only those are.
* Secrets: `deploy.hf_token_secret` must be one of the names; with none set, no Secret at all.

A resource that names something else is refused before anything is applied: `Validated=False`
with reason `NotAllowed`, a finding per field and a Warning Event, exactly like an invalid one.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from orchestrator.compatibility.rule import Finding
from orchestrator.profile.schema import Profile

IMAGES_ENV: Final = "SPECDEPLOY_ALLOWED_IMAGES"
SECRETS_ENV: Final = "SPECDEPLOY_ALLOWED_SECRETS"
IMAGE_RULE: Final = "operator.image-not-allowed"
SECRET_RULE: Final = "operator.secret-not-allowed"
#: Most entries read from either list: an admin's list, bounded all the same.
MAX_ENTRIES: Final = 256


@dataclass(frozen=True)
class Admission:
    images: tuple[str, ...] = ()
    """Glob patterns an explicit engine.image must match (the official images always pass)."""
    secrets: tuple[str, ...] = ()
    """Secret names deploy.hf_token_secret may be."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Admission:
        env = os.environ if env is None else env
        return cls(_entries(env.get(IMAGES_ENV, "")), _entries(env.get(SECRETS_ENV, "")))

    def env(self) -> dict[str, str]:
        """The environment that carries these lists to the operator's handlers."""
        return {IMAGES_ENV: ",".join(self.images), SECRETS_ENV: ",".join(self.secrets)}

    def findings(self, profile: Profile) -> list[Finding]:
        """One error per field that names what the admins do not allow."""
        found = []
        image = profile.engine.image
        if image is not None and not any(fnmatch.fnmatchcase(image, p) for p in self.images):
            allowed = ", ".join(self.images) or "none besides the engines' official images"
            found.append(
                Finding(
                    IMAGE_RULE,
                    "error",
                    what=f"engine.image={image!r} matches no image this operator allows ({allowed})",
                    why="the image runs with the namespace's service-account token; the "
                    "operator's admins choose which images tenants may run",
                    fix="remove engine.image to run the engine's official image for "
                    "engine.version, or ask the operator's admins to allow this image "
                    "(chart value admission.allowedImages)",
                    field="engine.image",
                )
            )
        secret = profile.deploy.hf_token_secret
        if secret is not None and secret not in self.secrets:
            allowed = ", ".join(self.secrets) or "none"
            found.append(
                Finding(
                    SECRET_RULE,
                    "error",
                    what=f"deploy.hf_token_secret={secret!r} is not a Secret this operator may "
                    f"hand to pods (allowed: {allowed})",
                    why="the pod would receive that Secret's HF_TOKEN key, a credential its "
                    "creator may not be allowed to read",
                    fix="name an allowed Secret, remove deploy.hf_token_secret for public models, "
                    "or ask the operator's admins to allow it (chart value "
                    "admission.allowedSecrets)",
                    field="deploy.hf_token_secret",
                )
            )
        return found


def _entries(text: str) -> tuple[str, ...]:
    return tuple(e.strip() for e in text.split(",") if e.strip())[:MAX_ENTRIES]
