"""The agent body's numbers are JSON whole numbers, as the document's ``integer`` says."""

from typing import Any

import pytest
from marshmallow import ValidationError

from hango.agent.config import AgentConfig

BODY = {"name": "a", "model": {"provider": "scripted"}}


@pytest.mark.parametrize("value", [5, 5.0])
def test_a_whole_number_is_taken_with_or_without_a_zero_fraction(value: Any) -> None:
    assert AgentConfig().load({**BODY, "max_turns": value})["max_turns"] == 5


@pytest.mark.parametrize("value", [5.5, "5", True, None])
def test_fractions_strings_and_booleans_are_not_whole_numbers(value: Any) -> None:
    with pytest.raises(ValidationError) as caught:
        AgentConfig().load({**BODY, "max_turns": value, "model": {"provider": "scripted", "max_tokens": value}})
    assert set(caught.value.normalized_messages()) == {"max_turns", "model"}
