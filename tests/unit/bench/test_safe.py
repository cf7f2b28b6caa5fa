"""Decoding what the bench does not control: JSON that nests, lies about its encoding or its
numbers comes back as BadJson; server text is shown with its control characters escaped."""

from __future__ import annotations

import pytest

from orchestrator.bench.safe import MAX_JSON_DEPTH, BadJson, decode_json, printable


class TestDecodeJson:
    def test_ordinary_documents(self) -> None:
        chunk = b'{"choices": [{"index": 0, "delta": {"content": "hi"}}], "usage": null}'
        assert decode_json(chunk) == {
            "choices": [{"index": 0, "delta": {"content": "hi"}}],
            "usage": None,
        }
        assert decode_json("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH) is not None

    @pytest.mark.parametrize(
        ("data", "problem"),
        [
            (b"[" * 1_000_000, "nested deeper than 64"),  # RecursionError inside json
            (b"[" * (MAX_JSON_DEPTH + 1) + b"]" * (MAX_JSON_DEPTH + 1), "nested deeper than 64"),
            (b'{"a": ' * 65 + b"1" + b"}" * 65, "nested deeper than 64"),
            (b'{"text": "\xc3\x28"}', r"not UTF-8 \(byte 10\)"),
            (b"9" * 5000, "digits"),
            (b"{nope", "Expecting property name"),
        ],
    )
    def test_refused_with_a_reason(self, data: bytes, problem: str) -> None:
        with pytest.raises(BadJson, match=problem):
            decode_json(data)

    def test_brackets_inside_strings_do_not_count_as_depth(self) -> None:
        text = '{"content": "' + "[" * 500 + '"}'
        assert decode_json(text) == {"content": "[" * 500}


class TestPrintable:
    def test_plain_text_is_unchanged(self) -> None:
        assert printable("Qwen/Qwen3-8B · ok") == "Qwen/Qwen3-8B · ok"

    def test_control_and_format_characters_are_escaped(self) -> None:
        shown = printable("a\x1b[31mb\nc\u202ed\x00")
        assert shown == "a\\x1b[31mb\\nc\\u202ed\\x00"
        assert shown.isprintable()

    def test_long_text_is_cut(self) -> None:
        assert printable("x" * 500, 10) == "x" * 10 + "…"
