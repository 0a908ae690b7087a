"""Request parsing and its OpenAPI: validation errors are hango's 400s with named fields, and every operation
documents the problem documents it may answer."""

from __future__ import annotations

import http
from collections.abc import Callable, Mapping
from copy import deepcopy
from typing import Any, NoReturn, TypeVar

import flask_smorest
import marshmallow as ma
from flask import Request
from webargs import core
from webargs.flaskparser import FlaskParser, is_json_request
from werkzeug.exceptions import RequestEntityTooLarge

from hango.api.context import services
from hango.api.schemas import PROBLEM_CONTENT_TYPE, PROBLEM_STATUSES, Problem
from hango.kernel.errors import InvalidInput
from hango.kernel.validation import field_errors, load_json

_View = TypeVar("_View", bound=Callable[..., Any])


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

    def load_querystring(self, req: Request, schema: ma.Schema) -> Any:
        """The query arguments, refusing a NUL in any value: no database column can hold or compare one."""
        for name, value in req.args.items(multi=True):
            if "\x00" in value:
                raise InvalidInput.field(name, "contains a NUL character")
        return super().load_querystring(req, schema)

    def _raw_load_json(self, req: Request) -> Any:
        """The body through hango's bounded decoder: a hostile body is a 400 naming ``body``, never a 500."""
        if not is_json_request(req):
            return core.missing
        return request_json(req, services().settings.max_json_depth)


def request_json(req: Request, max_depth: int) -> Any:
    """The request's JSON body (``missing`` when empty), decoded with nesting at most ``max_depth`` deep."""
    raw = req.get_data(cache=True)
    limit = req.max_content_length
    # Werkzeug stops reading a body sent without a length (chunked) at the limit, and hands back what it read.
    if req.content_length is None and limit is not None and len(raw) >= limit:
        raise RequestEntityTooLarge()
    if not raw:
        return core.missing
    return load_json(raw, max_depth=max_depth)


class Api(flask_smorest.Api):  # type: ignore[misc]
    """flask-smorest's Api documenting every error status as hango's problem document."""

    ERROR_SCHEMA = Problem
    # Each operation lists the statuses it answers; a catch-all ``default`` would make that list meaningless.
    DEFAULT_ERROR_RESPONSE_NAME = None

    def _register_responses(self) -> None:
        # As flask-smorest's own, lazily (only referenced ones appear), with problem+json for the error statuses.
        for status in http.HTTPStatus:
            response = problem_response(status) if status >= 400 else {"description": status.phrase}
            self.spec.components.response(status.name, response, lazy=True)


def problem_response(status: int) -> dict[str, Any]:
    """The OpenAPI response object of a problem document with this status."""
    description = PROBLEM_STATUSES.get(status) or http.HTTPStatus(status).phrase
    return {"description": description, "content": {PROBLEM_CONTENT_TYPE: {"schema": Problem}}}


class Blueprint(flask_smorest.Blueprint):  # type: ignore[misc]
    """flask-smorest blueprint using hango's parser, documenting the problems each operation may answer.

    Every operation may answer 401 and 500; one with arguments 400; one that takes a body 415, and 413 when it
    reads it. Views declare the others (403, 404, 409...) with :meth:`problems`.
    """

    ARGUMENTS_PARSER = Parser()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._prepare_doc_cbks.append(self._prepare_problems_doc)

    @staticmethod
    def problems(*statuses: int) -> Callable[[_View], _View]:
        """Document problem statuses a view answers besides those every operation of its kind may."""

        def decorator(view: _View) -> _View:
            apidoc: dict[str, Any] = deepcopy(getattr(view, "_apidoc", {}))
            apidoc["problems"] = sorted({*apidoc.get("problems", ()), *statuses})
            view._apidoc = apidoc  # type: ignore[attr-defined]
            return view

        return decorator

    @staticmethod
    def headers(*parameters: dict[str, Any]) -> Callable[[_View], _View]:
        """Document request headers a view reads itself, besides its query arguments (``doc`` would replace
        those)."""

        def decorator(view: _View) -> _View:
            apidoc: dict[str, Any] = deepcopy(getattr(view, "_apidoc", {}))
            apidoc["headers"] = [*apidoc.get("headers", ()), *parameters]
            view._apidoc = apidoc  # type: ignore[attr-defined]
            return view

        return decorator

    @staticmethod
    def _prepare_problems_doc(doc: dict[str, Any], doc_info: dict[str, Any], *, method: str, **_: Any) -> Any:
        statuses = {401, 500, *doc_info.get("problems", ())}
        if doc_info.get("arguments"):
            statuses.add(400)
        if method in ("post", "put", "patch"):
            statuses.add(415)
            if _reads_body(doc, doc_info):
                statuses.add(413)
        responses = doc.setdefault("responses", {})
        for status in sorted(statuses):
            responses.setdefault(str(status), http.HTTPStatus(status).name)
        doc.setdefault("parameters", []).extend(doc_info.get("headers", ()))
        return doc


def _reads_body(doc: dict[str, Any], doc_info: dict[str, Any]) -> bool:
    # A body schema given to ``arguments`` is in ``doc`` by now; one documented by hand comes with the manual doc.
    return "requestBody" in doc or "requestBody" in doc_info.get("manual_doc", {})
