"""The grammars the OpenAPI document states for values the services parse."""

import re
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hango.api.patterns import NOT_BLANK, duration_pattern
from hango.api.sse import LAST_EVENT_ID, MAX_SEQ
from hango.kernel.config import parse_duration

MAXIMA = [timedelta(days=30), timedelta(hours=1), timedelta(seconds=90), timedelta(days=7, seconds=1)]


@pytest.mark.parametrize("maximum", MAXIMA)
def test_every_duration_the_pattern_admits_is_above_zero_and_at_most_the_maximum(maximum: timedelta) -> None:
    @given(st.from_regex(duration_pattern(maximum), fullmatch=True))
    def admitted(text: str) -> None:
        assert timedelta(0) < parse_duration(text) <= maximum

    admitted()


@pytest.mark.parametrize(
    ("text", "admitted"),
    [
        ("30d", True),
        ("720h", True),
        ("2592000", True),
        (" 0030 d ", True),
        ("1.5h", True),
        ("0.001ms", True),
        ("30.0d", True),
        ("30.5d", False),
        ("31d", False),
        ("2592001s", False),
        ("0", False),
        ("0.0s", False),
        ("0s", False),
        ("-1s", False),
        ("1h30m", False),
        ("\u0663h", False),
        ("", False),
    ],
)
def test_the_duration_pattern_draws_the_line_where_the_services_do(text: str, admitted: bool) -> None:
    maximum = timedelta(days=30)
    assert (re.fullmatch(duration_pattern(maximum), text) is not None) is admitted
    if admitted:
        assert timedelta(0) < parse_duration(text) <= maximum


@pytest.mark.parametrize(("text", "blank"), [("x", False), (" a ", False), ("", True), (" \t\u3000\x1c", True)])
def test_not_blank_means_what_str_strip_leaves(text: str, blank: bool) -> None:
    assert (re.search(NOT_BLANK, text) is None) is blank
    assert (not text.strip()) is blank


@given(st.text(alphabet="0123456789", min_size=1, max_size=21) | st.sampled_from([str(MAX_SEQ), str(MAX_SEQ + 1)]))
def test_the_last_event_id_pattern_admits_exactly_the_ids_the_streams_take(text: str) -> None:
    taken = len(text) <= 19 and int(text) <= MAX_SEQ
    assert (re.fullmatch(LAST_EVENT_ID["schema"]["pattern"], text) is not None) is taken
