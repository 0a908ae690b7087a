from hango.kernel.errors import FieldError
from hango.kernel.validation import field_errors


def test_nested_marshmallow_messages_become_dotted_indexed_fields() -> None:
    messages = {
        "decisions": {1: {"args": {"content": ["Not a valid string."]}}},
        "email": ["Not a valid email address.", "Longer than maximum length 320."],
        "_schema": ["Invalid input type."],
    }
    assert field_errors(messages) == [
        FieldError("decisions[1].args.content", "Not a valid string."),
        FieldError("email", "Not a valid email address."),
        FieldError("email", "Longer than maximum length 320."),
        FieldError("body", "Invalid input type."),
    ]
