import re
import uuid
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hango.kernel.errors import InvalidInput
from hango.kernel.pagination import cursor_pattern, decode_cursor, encode_cursor

TIME_ORDERED = [datetime, uuid.UUID]


def test_a_cursor_round_trips_typed_keys() -> None:
    when = datetime(2026, 11, 30, 12, 0, 1, 123456, tzinfo=UTC)
    ident = uuid.uuid4()
    cursor = encode_cursor([when, ident])
    assert decode_cursor(cursor, TIME_ORDERED) == (when, ident)
    assert decode_cursor(encode_cursor([7]), [int]) == (7,)
    assert decode_cursor(encode_cursor(["/memories/a_b.md"]), [str]) == ("/memories/a_b.md",)


@pytest.mark.parametrize("kinds", [TIME_ORDERED, [int]])
def test_the_cursors_a_list_returns_match_the_pattern_it_documents(kinds: list[type]) -> None:
    values = {datetime: datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC), uuid.UUID: uuid.uuid4(), int: 10**18 - 1}
    pattern = cursor_pattern(kinds)
    assert pattern is not None
    assert re.fullmatch(pattern, encode_cursor([values[kind] for kind in kinds]))


@given(st.from_regex(f"^{cursor_pattern(TIME_ORDERED)}$", fullmatch=True))
def test_every_cursor_the_pattern_admits_is_a_position(cursor: str) -> None:
    when, ident = decode_cursor(cursor, TIME_ORDERED)
    assert when.tzinfo is UTC
    assert encode_cursor([when, ident]) == f"{int(cursor.split('_')[0])}_{ident.hex}"


@given(st.from_regex(f"^{cursor_pattern([int])}$", fullmatch=True))
def test_every_sequence_cursor_the_pattern_admits_fits_a_bigint(cursor: str) -> None:
    (seq,) = decode_cursor(cursor, [int])
    assert 0 <= seq < 2**63


@pytest.mark.parametrize(
    "cursor",
    [
        "",
        "not-a-cursor",
        "12",
        "1_2",
        "123456789012345678_" + "0" * 32,  # 18 digits of microseconds: past what a time holds
        "1_" + "0" * 31,
        "1_" + "g" * 32,
        "\u0661_" + "0" * 32,  # a digit, but not an ASCII one
        "1_" + "0" * 32 + "\n",
        encode_cursor([7]),
    ],
)
def test_a_malformed_cursor_is_invalid_input_naming_cursor(cursor: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        decode_cursor(cursor, TIME_ORDERED)
    assert [error.field for error in caught.value.errors] == ["cursor"]
