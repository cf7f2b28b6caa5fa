"""The launch `render` prints (and `run` echoes) is shell-quoted (issue 19 §6): pasted into bash it
runs exactly the argv of launch.json, whatever the words hold: JSON, spaces, quotes, `$( )`, a
newline or ESC. The real CLI runs under the memory cap and deadline of `capped_cli`; bash itself
reads the line back."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from orchestrator.shell_text import shell_line
from tests.hostile.capped_cli import specdeploy
from tests.support import REPO_ROOT

BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(BASH is None, reason="needs bash to read the line back")


def _words_bash_reads(line: str, cwd: Path) -> list[str]:
    """The argv bash would run for `line`, without running it: `set --` then print each word."""
    script = f"set -- {line}\nprintf '%s\\0' \"$@\""
    done = subprocess.run(
        [BASH or "bash", "--norc", "--noprofile", "-c", script],
        capture_output=True, cwd=cwd, timeout=30, check=True,
    )  # fmt: skip
    return done.stdout.decode().split("\0")[:-1]


@pytest.mark.parametrize(
    "profile", sorted((REPO_ROOT / "profiles").glob("*.yaml")), ids=lambda p: p.stem
)
def test_the_printed_launch_is_the_argv_of_launch_json(tmp_path: Path, profile: Path) -> None:
    out = tmp_path / "out"
    run = specdeploy("render", str(profile), "--out", str(out), "--offline", cwd=tmp_path)
    if run.returncode != 0:
        pytest.skip(f"{profile.name} does not render offline (exit {run.returncode})")
    (line,) = [row for row in run.output.splitlines() if row.startswith("launch: ")]
    launch = json.loads((out / "launch.json").read_text())
    env = [f"{key}={value}" for key, value in sorted(launch["env"].items())]
    assert _words_bash_reads(line.removeprefix("launch: "), tmp_path) == env + launch["argv"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


HOSTILE_WORDS = [
    '{"method": "eagle3", "model": "a b"}',
    "it's",
    "$(touch pwned)",
    "`touch pwned`",
    "a\nb",
    "\x1b]0;title\x07",
    "tab\there",
    "back\\slash",
    "",
    "ünïcode",
    "\u2028line",
    "*",
    "~",
    "a;b|c&d>e",
]


def test_any_word_reads_back_as_itself_and_runs_nothing(tmp_path: Path) -> None:
    line = shell_line(["vllm", "serve", *HOSTILE_WORDS], {"VLLM_X": "1 2", "B": "$HOME"})
    assert (
        "\n" not in line and "\x1b" not in line and "\x07" not in line
    )  # nothing raw on a terminal
    assert _words_bash_reads(line, tmp_path) == [
        "B=$HOME",
        "VLLM_X=1 2",
        "vllm",
        "serve",
        *HOSTILE_WORDS,
    ]
    assert list(tmp_path.iterdir()) == []  # no `$( )` or backquote ran
