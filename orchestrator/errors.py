"""User-facing errors: each says what went wrong, why it matters and how to fix it.

Anything that is not an `OrchestratorError` is a bug and keeps its traceback.
"""

from __future__ import annotations

from typing import ClassVar

# Exit codes are a contract (docs/cli.md). 2 is click's usage error.
EXIT_OK = 0
#: A command-line value refused (click's usage errors; `UsageError` for values click cannot check).
EXIT_USAGE = 2
#: Any other user error, including output that cannot be written (docs/cli.md).
EXIT_OTHER = 1
EXIT_PROFILE_INVALID = 3
EXIT_INCOMPATIBLE = 4
EXIT_OVER_BUDGET = 5
EXIT_CLUSTER = 6
EXIT_BENCH_UNUSABLE = 7
#: `status`: the cluster answered, and the deployment is not ready (docs/cli.md).
EXIT_NOT_READY = 8


class OrchestratorError(Exception):
    """Base for every error the user can fix."""

    exit_code: ClassVar[int] = 1

    def __init__(
        self, what: str, *, why: str = "", fix: str = "", rule: str = "", field: str = ""
    ) -> None:
        super().__init__(what)
        self.what = what
        self.why = why
        self.fix = fix
        self.rule = rule
        """The finding id this error becomes when a planning stage raises it (e.g.
        "engine.multi-node"); empty for errors that never become findings."""
        self.field = field
        """The profile field the error is about, when there is one."""

    def render(self) -> str:
        lines = [self.what]
        if self.why:
            lines.append(f"  why: {self.why}")
        if self.fix:
            lines.append(f"  fix: {self.fix}")
        return "\n".join(lines)


class ProfileError(OrchestratorError):
    """The profile file is not valid YAML or does not match the schema."""

    exit_code = EXIT_PROFILE_INVALID


class IncompatibleError(OrchestratorError):
    """Checkpoints, method and engine do not go together."""

    exit_code = EXIT_INCOMPATIBLE


class OverMemoryBudgetError(OrchestratorError):
    """The plan does not fit the GPU memory budget."""

    exit_code = EXIT_OVER_BUDGET


class OutputError(OrchestratorError):
    """Output cannot be written where the user asked: the filesystem refused, or the directory
    holds files specdeploy did not write. Exit 1: not a profile, pairing, memory, cluster or
    bench problem, so none of 3-7 applies."""

    exit_code = EXIT_OTHER


class DeployError(OrchestratorError):
    """A cluster or Docker daemon refused or failed."""

    exit_code = EXIT_CLUSTER


class BenchError(OrchestratorError):
    """The benchmark endpoints are unusable."""

    exit_code = EXIT_BENCH_UNUSABLE


class UsageError(OrchestratorError):
    """A command-line value the command refuses after click parsed it (e.g. `catalog add --as`
    naming an id the hub would refuse). Exit 2, as click's own usage errors."""

    exit_code = EXIT_USAGE
