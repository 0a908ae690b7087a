import uuid
from datetime import UTC, datetime

import pytest

from hango.errors import InvalidInput
from hango.pagination import decode_cursor, encode_cursor


def test_a_cursor_round_trips_typed_keys() -> None:
    when = datetime(2026, 11, 30, 12, 0, 1, 123456, tzinfo=UTC)
    ident = uuid.uuid4()
    cursor = encode_cursor([when, ident])
    assert decode_cursor(cursor, [datetime.fromisoformat, uuid.UUID]) == (when, ident)


@pytest.mark.parametrize("cursor", ["", "not-base64!", "W10", encode_cursor(["x"]), encode_cursor([1, 2, 3])])
def test_a_malformed_cursor_is_invalid_input_naming_cursor(cursor: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        decode_cursor(cursor, [datetime.fromisoformat, uuid.UUID])
    assert [error.field for error in caught.value.errors] == ["cursor"]
