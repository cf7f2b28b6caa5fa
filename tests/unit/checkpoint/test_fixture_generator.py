"""The committed fixtures are exactly what tests/fixtures/checkpoints/generate_fixtures.py writes."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
GENERATOR = FIXTURES / "checkpoints" / "generate_fixtures.py"
NOT_GENERATED = {"generate_fixtures.py", "README.md"}


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name not in NOT_GENERATED and "__pycache__" not in p.parts
    }


def test_committed_fixtures_match_the_generator(tmp_path: Path) -> None:
    (tmp_path / "checkpoints").mkdir()
    shutil.copy(GENERATOR, tmp_path / "checkpoints" / GENERATOR.name)
    subprocess.run([sys.executable, str(tmp_path / "checkpoints" / GENERATOR.name)], check=True)
    for sub in ("checkpoints", "hf_cache"):
        fresh, committed = _files(tmp_path / sub), _files(FIXTURES / sub)
        assert fresh.keys() == committed.keys(), sub
        changed = [name for name in fresh if fresh[name] != committed[name]]
        assert not changed, f"regenerate with `python {GENERATOR.relative_to(FIXTURES.parents[1])}`"
