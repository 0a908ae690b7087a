"""The digest decisions are bound to: SHA-256 over the canonical JSON of ``hango.kernel.canonical``, checked against
forms
written out by hand. It is RFC 8785 (checked on the RFC's own examples) except that integers keep every digit and
integral floats keep a ``.0``, so that no two values a tool can tell apart share a digest."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from hango.kernel.canonical import CanonicalizationError, canonical_json, sha256_hex


def _digest(canonical: str) -> str:
    return hashlib.sha256(canonical.encode()).hexdigest()


def test_the_digest_is_of_the_canonical_form_whatever_the_key_order() -> None:
    expected = _digest('{"content":"hi","file_path":"/memories/AGENTS.md"}')
    assert sha256_hex({"file_path": "/memories/AGENTS.md", "content": "hi"}) == expected
    assert sha256_hex({"content": "hi", "file_path": "/memories/AGENTS.md"}) == expected


# RFC 8785 Appendix B and section 3.2.2.3, whose numbers are all non-integral (or far past 2**53) doubles.
RFC_8785_EXAMPLES = [
    (
        '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001], '
        '"string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/", "literals": [null, true, false]}',
        '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        '"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}',
    ),
    (
        '{"\\u20ac": "Euro Sign", "\\r": "Carriage Return", "\\ufb33": "Hebrew Letter Dalet With Dagesh", '
        '"1": "One", "\\ud83d\\ude00": "Emoji: Grinning Face", "\\u0080": "Control", "\\u00f6": "Latin Small Letter O '
        'With Diaeresis"}',
        '{"\\r":"Carriage Return","1":"One","\u0080":"Control","ö":"Latin Small Letter O With Diaeresis",'
        '"€":"Euro Sign","😀":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}',
    ),
    (
        "[5e-324, 1.7976931348623157e308, 0.1, -1.5, 1e21, 1e-7, 123456789.125]",
        "[5e-324,1.7976931348623157e+308,0.1,-1.5,1e+21,1e-7,123456789.125]",
    ),
]


@pytest.mark.parametrize(("text", "canonical"), RFC_8785_EXAMPLES)
def test_json_without_big_integers_or_integral_floats_is_written_as_rfc_8785_says(text: str, canonical: str) -> None:
    assert canonical_json(json.loads(text)) == canonical.encode()


def test_integers_keep_every_digit() -> None:
    assert canonical_json({"n": 2**53 + 1}) == b'{"n":9007199254740993}'
    assert canonical_json([-(10**30), 0, 7]) == b"[-1000000000000000000000000000000,0,7]"
    assert canonical_json(10**400) == ("1" + "0" * 400).encode()


def test_integral_floats_stay_floats() -> None:
    written = canonical_json([1.0, -2.0, 0.0, -0.0, 1e20, 1e21, 9.007199254740994e15])
    assert written == b"[1.0,-2.0,0.0,0.0,100000000000000000000.0,1e+21,9007199254740994.0]"


# Each pair differs for the tool that receives it; the first five had one digest before integers were exact.
COLLISIONS = [
    ({"offset": 9007199254740993}, {"offset": 9007199254740992}),
    ({"offset": 10**400}, {"offset": "1" + "0" * 400}),
    ({"n": 2**60}, {"n": 1152921504606847000}),
    ({"n": 1}, {"n": 1.0}),
    ({"n": 2**53}, {"n": float(2**53)}),
    ({"n": 1}, {"n": True}),
    ({"n": 1}, {"n": "1"}),
    ({"n": None}, {}),
    ({"a": [1, 2]}, {"a": [2, 1]}),
]


@pytest.mark.parametrize(("one", "other"), COLLISIONS)
def test_arguments_a_tool_tells_apart_have_different_digests(one: Any, other: Any) -> None:
    assert sha256_hex(one) != sha256_hex(other)


def test_the_digest_survives_a_round_trip_through_json_text() -> None:
    value = {"offset": 9007199254740993, "big": 10**40, "f": 0.1, "whole": 3.0, "s": "é\u2028", "l": [True, None]}
    assert sha256_hex(json.loads(json.dumps(value))) == sha256_hex(value)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), {1: "x"}, {"s"}, "\ud800", object()])
def test_what_json_cannot_hold_is_refused(value: Any) -> None:
    with pytest.raises(CanonicalizationError):
        canonical_json(value)
