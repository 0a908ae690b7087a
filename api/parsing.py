"""Request parsing: a flask-smorest blueprint whose validation errors are hango's 400s with named fields."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

import flask_smorest
import marshmallow as ma
from flask import Request
from webargs.flaskparser import FlaskParser

from hango.errors import InvalidInput
from hango.validation import field_errors


class Parser(FlaskParser):
    """webargs parser raising :class:`InvalidInput` (400) instead of aborting with a 422."""

    DEFAULT_VALIDATION_STATUS = 400
    # Unknown query parameters are refused like unknown body fields: a typo such as ``?sate=`` must not
    # silently return an unfiltered list.
    DEFAULT_UNKNOWN_BY_LOCATION: dict[str, str | None] = {
        **FlaskParser.DEFAULT_UNKNOWN_BY_LOCATION,
        "query": ma.RAISE,
    }

    def handle_error(
        self,
        error: ma.ValidationError,
        req: Request,
        schema: ma.Schema,
        *,
        error_status_code: int | None,
        error_headers: Mapping[str, str] | None,
    ) -> NoReturn:
        """Report every invalid field; the request location (json, query) is not part of the field name."""
        messages: dict[str, Any] = error.normalized_messages()  # type: ignore[no-untyped-call]
        fields = [field for location in messages.values() for field in field_errors(location)]
        summary = "; ".join(f"{field.field}: {field.message}" for field in fields[:5])
        raise InvalidInput(f"The request is not valid: {summary}", fields)

    def _handle_invalid_json_error(self, error: Exception, req: Request, *args: Any, **kwargs: Any) -> NoReturn:
        raise InvalidInput.field("body", "is not valid JSON")


class Blueprint(flask_smorest.Blueprint):  # type: ignore[misc]
    """flask-smorest blueprint using hango's parser."""

    ARGUMENTS_PARSER = Parser()
