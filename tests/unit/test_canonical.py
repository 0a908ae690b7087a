"""The digest decisions are bound to: SHA-256 over RFC 8785 canonical JSON, checked against canonical forms
written out by hand (sorted keys, no whitespace, ECMAScript numbers, UTF-8 strings)."""

from __future__ import annotations

import hashlib

from hango.canonical import sha256_hex


def _digest(canonical: str) -> str:
    return hashlib.sha256(canonical.encode()).hexdigest()


def test_the_digest_is_of_the_canonical_form_whatever_the_key_order() -> None:
    expected = _digest('{"content":"hi","file_path":"/memories/AGENTS.md"}')
    assert sha256_hex({"file_path": "/memories/AGENTS.md", "content": "hi"}) == expected
    assert sha256_hex({"content": "hi", "file_path": "/memories/AGENTS.md"}) == expected


def test_numbers_strings_and_nesting_are_written_as_rfc_8785_says() -> None:
    value = {"b": [1.0, 2.5e30, -0.0, True, None], "a": {"é": "\u20ac\n"}, "c": 10}
    assert sha256_hex(value) == _digest('{"a":{"é":"€\\n"},"b":[1,2.5e+30,0,true,null],"c":10}')


def test_integers_beyond_a_doubles_exact_range_are_digested_as_the_double_a_javascript_reader_sees() -> None:
    assert sha256_hex({"n": 2**60}) == _digest('{"n":1152921504606847000}')
    assert sha256_hex({"n": 10**400}) == _digest('{"n":"' + "1" + "0" * 400 + '"}')


def test_different_arguments_have_different_digests() -> None:
    assert sha256_hex({"content": "hi"}) != sha256_hex({"content": "hi "})
