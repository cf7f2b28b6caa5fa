"""What a credential looks like, and hiding credentials in text specdeploy shows or writes.

One table serves both the `serving.secret-in-args` rule (a token typed into the profile would be
written in plain text to launch.json and the manifests) and the redaction of engine-log tails and
server error text, so the two cannot disagree about what a secret is.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

REDACTED: Final = "[redacted]"


@dataclass(frozen=True)
class TokenKind:
    """A credential format recognisable by its shape, with the document that defines it."""

    name: str
    pattern: re.Pattern[str]
    source: str


#: Credential formats with a fixed, documented prefix (so ordinary words never match).
TOKEN_KINDS: Final[tuple[TokenKind, ...]] = (
    TokenKind(
        "a Hugging Face token",
        re.compile(r"\b(?:hf|api_org)_[A-Za-z0-9]{20,}"),
        "https://huggingface.co/docs/hub/security-tokens",
    ),
    TokenKind(
        "a GitHub token",
        re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})"),
        "https://github.blog/engineering/platform-security/behind-githubs-new-authentication-token-formats/",
    ),
    TokenKind(
        "an OpenAI-style API key",
        re.compile(r"\bsk-[A-Za-z0-9_-]{20,}"),
        "https://platform.openai.com/docs/api-reference/authentication",
    ),
    TokenKind(
        "an NVIDIA API key",
        re.compile(r"\bnvapi-[A-Za-z0-9_-]{20,}"),
        "https://docs.api.nvidia.com/nim/docs/api-quickstart",
    ),
    TokenKind(
        "an AWS access key id",
        re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
        "https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_identifiers.html",
    ),
    TokenKind(
        "a JSON Web Token",
        re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"),
        "https://datatracker.ietf.org/doc/html/rfc7519#section-7.1",
    ),
)

#: Engine flags whose value is a credential: vLLM `--hf-token` (vllm/engine/arg_utils.py) and
#: `--api-key` (vllm/entrypoints/launchers/cli_args.py) at v0.32.0; SGLang `--api-key` and
#: `--admin-api-key` (python/sglang/srt/entrypoints/http_server.py at v0.5.23); and the same
#: words in any other spelling (`--token`, `--hf_token`, `--password`, ...).
SECRET_FLAG: Final = re.compile(
    r"--(?:[a-z0-9]+[-_])*(?:token|api[-_]key|secret|password|passwd|credentials?)", re.IGNORECASE
)
#: Environment variables whose values are credentials: the usual names, and any name ending in
#: one of these words.
_SECRET_ENV: Final = re.compile(r"(?:^|_)(?:TOKEN|API_KEY|SECRET|PASSWORD|PASSWD|CREDENTIALS?)$")
#: Environment values shorter than this are not redacted (a value like "1" is not a credential,
#: and hiding it would garble every log line).
_MIN_SECRET_LEN: Final = 8
#: Credentials in a URL or an image reference: "scheme://user:password@host" or "user:pw@host/".
USERINFO: Final = re.compile(r"([^\s/@:]{1,256}):([^\s/@]{1,256})@(?=[^\s/@])")


def find_token(text: str) -> TokenKind | None:
    """The first credential format that occurs in `text`, or None."""
    return next((kind for kind in TOKEN_KINDS if kind.pattern.search(text)), None)


def secret_flag_value(argv: tuple[str, ...] | list[str], index: int) -> str | None:
    """The credential argv[index] carries as `--api-key=VALUE` or `--api-key VALUE`, or None."""
    token = argv[index]
    flag, equals, value = token.partition("=")
    if not SECRET_FLAG.fullmatch(flag):
        return None
    if equals:
        return value or None
    following = argv[index + 1] if index + 1 < len(argv) else None
    return following if following is not None and not following.startswith("-") else None


def environment_secrets(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Values of credential-named environment variables (HF_TOKEN, VLLM_API_KEY, ...), longest
    first so that a secret containing another is hidden whole."""
    env = os.environ if environ is None else environ
    values = {
        value
        for name, value in env.items()
        if _SECRET_ENV.search(name.upper()) and len(value) >= _MIN_SECRET_LEN
    }
    return tuple(sorted(values, key=len, reverse=True))


def redact(text: str, known: Iterable[str] | None = None) -> str:
    """`text` with every known secret value (by default the credential-named environment
    variables), every token-shaped string, the value after a secret flag and URL passwords
    replaced by [redacted]."""
    for value in environment_secrets() if known is None else known:
        text = text.replace(value, REDACTED)
    for kind in TOKEN_KINDS:
        text = kind.pattern.sub(REDACTED, text)
    text = re.sub(
        rf"({SECRET_FLAG.pattern})(=|\s+)(?!-)(\S+)",
        lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}",
        text,
        flags=re.IGNORECASE,
    )
    return USERINFO.sub(lambda m: m.group(0).replace(m.group(2), REDACTED, 1), text)
