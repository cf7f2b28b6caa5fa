"""Workloads: built-in sets are deterministic and differ; JSONL items parse or fail clearly."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from orchestrator.bench.workload import BUILTIN_NAMES, WorkloadError, load_workload


class TestBuiltins:
    def test_deterministic(self) -> None:
        for name in BUILTIN_NAMES:
            assert load_workload(name) == load_workload(name)

    def test_code_edit_carries_the_source_as_prediction_and_in_the_prompt(self) -> None:
        items = load_workload("code-edit").items
        assert all(i.prediction and i.prediction in i.prompt for i in items)

    def test_chat_has_no_prediction_and_several_distinct_prompts(self) -> None:
        items = load_workload("chat").items
        assert all(i.prediction is None for i in items)
        assert len({i.prompt for i in items}) > 10


class TestJsonl:
    def write(self, tmp_path: Path, *rows: object) -> Path:
        path = tmp_path / "w.jsonl"
        path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
        return path

    def test_prompt_and_messages_items(self, tmp_path: Path) -> None:
        path = self.write(
            tmp_path,
            {"prompt": "hi", "max_tokens": 5, "prediction": "hello"},
            {
                "messages": [
                    {"role": "system", "content": "be brief"},
                    {"role": "user", "content": "q"},
                ]
            },
        )
        first, second = load_workload(str(path)).items
        assert (first.prompt, first.max_tokens, first.prediction) == ("hi", 5, "hello")
        assert first.messages[0].content == "hi"
        assert [m.role for m in second.messages] == ["system", "user"]
        assert second.max_tokens is None

    @pytest.mark.parametrize(
        ("row", "problem"),
        [
            ({"prompt": "x", "max_token": 3}, "unknown keys"),
            ({"prompt": "x", "max_tokens": 0}, "max_tokens=0"),
            ({"prompt": "x", "max_tokens": True}, "max_tokens=True"),
            ({"prompt": "x", "max_tokens": 10**30}, "is not a positive integer"),
            ({"messages": [{"role": "user"}]}, "role' and 'content"),
            ({}, "needs a non-empty"),
            ([1, 2], "not a JSON object"),
        ],
    )
    def test_bad_rows_name_the_line(self, tmp_path: Path, row: object, problem: str) -> None:
        path = self.write(tmp_path, {"prompt": "ok"}, row)
        with pytest.raises(WorkloadError, match=problem) as info:
            load_workload(str(path))
        assert f"{path}:2" in info.value.what
        assert info.value.fix

    def test_not_json(self, tmp_path: Path) -> None:
        path = tmp_path / "w.jsonl"
        path.write_text("{nope\n")
        with pytest.raises(WorkloadError, match="not JSON"):
            load_workload(str(path))

    @pytest.mark.parametrize(
        ("line", "problem"),
        [
            (b'{"prompt": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested deeper than 64"),
            (b'{"prompt": "' + b"[" * 70 + b'", "x": ' + b"[" * 65 + b"]" * 65 + b"}", "deeper"),
            (b'{"prompt": "caf\xe9"}', "not UTF-8"),
            (b'{"prompt": "x", "max_tokens": ' + b"9" * 5000 + b"}", "not JSON"),
        ],
    )
    def test_hostile_lines_are_named_not_crashes(
        self, tmp_path: Path, line: bytes, problem: str
    ) -> None:
        path = tmp_path / "w.jsonl"
        path.write_bytes(b'{"prompt": "ok"}\n' + line + b"\n")
        with pytest.raises(WorkloadError, match=problem) as info:
            load_workload(str(path))
        assert f"{path}:2" in info.value.what

    def test_a_fifo_is_not_read(self, tmp_path: Path) -> None:
        fifo = tmp_path / "w.jsonl"
        os.mkfifo(fifo)
        with pytest.raises(WorkloadError, match="neither a built-in workload nor a file"):
            load_workload(str(fifo))  # opening it would block until a writer appears

    def test_unknown_name(self) -> None:
        with pytest.raises(WorkloadError, match="neither a built-in") as info:
            load_workload("no-such-set")
        assert "code-edit" in info.value.fix
