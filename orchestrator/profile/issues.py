"""A problem in a profile file, pinned to its place, and the error that carries them all."""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.errors import ProfileError

Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class ProfileIssue:
    """One problem in a profile file, pinned to a place in it."""

    path: str  # dotted field path as written in the YAML, e.g. "proposer.num_speculative_token"
    line: int | None
    column: int | None
    message: str
    fix: str = ""  # the fix when the message alone does not imply it
    why: str = ""  # why it is refused, when that is more than "it could not be read"

    def where(self, file: str) -> str:
        if self.line is None:
            return file
        return f"{file}:{self.line}:{self.column}"


class ProfileInvalid(ProfileError):
    """A profile failed to load; carries every issue found."""

    def __init__(self, file: str, issues: list[ProfileIssue]) -> None:
        self.file = file
        self.issues = issues
        first = issues[0]
        what = "\n".join(f"{i.where(file)}: {i.path or '(top)'}: {i.message}" for i in issues)
        super().__init__(
            what,
            why=first.why or "specdeploy renders nothing from a profile it cannot read exactly",
            fix=fix_for(first),
        )


def dotted(loc: Loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def fix_for(issue: ProfileIssue) -> str:
    if issue.fix:
        return issue.fix
    if "did you mean" in issue.message:
        suggestion = issue.message.split("did you mean ", 1)[1].rstrip("?").strip("'")
        if issue.message.startswith("unknown field"):
            return f"rename `{issue.path.rsplit('.', 1)[-1]}` to `{suggestion}`"
        return f"set `{issue.path}: {suggestion}`"
    if issue.message.startswith("duplicate key"):
        return f"keep one `{issue.path.rsplit('.', 1)[-1]}` entry and delete the other"
    if issue.message == "required field is missing":
        return f"add `{issue.path}` to the profile (`specdeploy schema` shows every field)"
    return (
        f"edit `{issue.path or 'the profile'}` as described (`specdeploy schema` shows every field)"
    )
