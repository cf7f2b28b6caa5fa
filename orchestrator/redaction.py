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


#: A known secret shorter than this is replaced only where it stands alone (not inside a longer
#: word or number): a 3-character key replaced everywhere would garble every report, and a key
#: that short cannot be told from ordinary text anyway.
SHORT_SECRET_LEN: Final = _MIN_SECRET_LEN
#: The shortest cut-off start of a secret hidden before a truncation mark ("…"): a 3-character
#: fragment says nothing about a key, and hiding it would garble ordinary cut text.
_MIN_FRAGMENT: Final = 4
_TRUNCATED: Final = "…"
_BACKSLASHED: Final = re.compile(r"([\\`*_\[\]<>|#&])")


def _base64_forms(value: str) -> set[str]:
    """`value` as it appears inside base64 text (standard and URL-safe alphabets), at each of
    the three byte alignments it can have in a longer encoded string: only the characters that
    encode its own bytes, so one matches wherever the value was encoded."""
    import base64

    data = value.encode("utf-8")
    forms: set[str] = set()
    for skip in range(3):
        part = data[skip:]
        whole = part[: len(part) // 3 * 3]
        if len(whole) >= 6:
            encoded = base64.b64encode(whole).decode("ascii")
            forms |= {encoded, encoded.replace("+", "-").replace("/", "_")}
    return forms


def shown_forms(value: str) -> set[str]:
    """Every spelling in which `value` can reach specdeploy's output: as is, URL-encoded,
    base64-encoded, JSON- and repr-escaped, and Markdown-escaped (as reports write server text)."""
    import json
    from urllib.parse import quote, quote_plus

    forms = {
        value,
        quote(value, safe=""),
        quote(value),
        quote_plus(value),
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
        repr(value)[1:-1],
        _BACKSLASHED.sub(r"\\\1", value),
    }
    if len(value) >= SHORT_SECRET_LEN:
        forms |= _base64_forms(value)
    return {form for form in forms if form}


class Redactor:
    """Hides a fixed set of secret values (an API key, its "Bearer KEY" header value, a URL's
    password, ...) in every spelling `shown_forms` knows, in text and in JSON-like data.

    A secret of SHORT_SECRET_LEN characters or more is replaced wherever it occurs, and so is a
    start of it (at least 4 characters) cut off by a truncation mark "…". A shorter one is
    replaced only where it stands alone (no letter or digit on either side), so a key "abc"
    hides "abc" in "key abc." but leaves "abcd" alone."""

    def __init__(self, secrets: Iterable[str]) -> None:
        long_forms: set[str] = set()
        short_forms: set[str] = set()
        for secret in {s for s in secrets if s}:
            target = long_forms if len(secret) >= SHORT_SECRET_LEN else short_forms
            target |= shown_forms(secret)
        self._forms = tuple(sorted(long_forms, key=len, reverse=True))
        self._short = tuple(
            re.compile(rf"(?<![A-Za-z0-9]){re.escape(form)}(?![A-Za-z0-9])")
            for form in sorted(short_forms, key=len, reverse=True)
        )

    def __bool__(self) -> bool:
        return bool(self._forms or self._short)

    def __call__(self, text: str) -> str:
        """`text` with every known secret replaced by [redacted]."""
        for form in self._forms:
            text = text.replace(form, REDACTED)
        for pattern in self._short:
            text = pattern.sub(REDACTED, text)
        return self._cut_fragments(text) if _TRUNCATED in text else text

    def _cut_fragments(self, text: str) -> str:
        """Hide the start of a secret that a truncation cut off just before "…"."""
        pieces = text.split(_TRUNCATED)
        for index, piece in enumerate(pieces[:-1]):
            for form in self._forms:
                longest = min(len(form) - 1, len(piece))
                cut = next(
                    (n for n in range(longest, _MIN_FRAGMENT - 1, -1) if piece.endswith(form[:n])),
                    0,
                )
                if cut:
                    pieces[index] = piece[:-cut] + REDACTED
                    break
        return _TRUNCATED.join(pieces)

    def data(self, value: object) -> object:
        """`value` (JSON-like: dicts, lists, strings, numbers) with every string redacted,
        dictionary keys included."""
        if isinstance(value, str):
            return self(value)
        if isinstance(value, dict):
            return {self.data(k): self.data(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.data(v) for v in value]
        return value


#: Query parameters whose value is a credential in a URL (`?api_key=...`, `?token=...`).
_SECRET_PARAM: Final = re.compile(r"(?:^|[-_])(?:key|token|secret|password|passwd|sig|signature)$")


def url_secrets(url: str) -> tuple[str, ...]:
    """The credentials a URL carries: the password of `user:password@host` and the values of
    credential-named query parameters."""
    from urllib.parse import parse_qsl, unquote, urlsplit

    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return ()
    found = [password, unquote(password)] if password else []
    if "@" in parts.netloc and password is None and parts.username:
        found += [parts.username, unquote(parts.username)]  # a token given as the user name
    found += [v for k, v in parse_qsl(parts.query) if v and _SECRET_PARAM.search(k.lower())]
    return tuple(found)
