"""What the client raises: a problem document the server answered, or a failure to talk to the server at all."""

from __future__ import annotations

from typing import Any

import httpx

from hango.client.types import FieldError


class ClientError(Exception):
    """Anything :class:`hango.client.Client` raises."""


class ProblemError(ClientError):
    """The server refused a request with an RFC 9457 problem document (or another error status).

    Attributes:
        status: the HTTP status.
        type: the problem type, e.g. ``urn:hango:problem:validation`` (``about:blank`` for a non-problem answer).
        title: the problem's short title.
        detail: the human-readable explanation.
        errors: each invalid field of a 400, ``[]`` when none is named.
        body: the whole decoded document, with any extra members (``remaining``, ``checks``).
    """

    def __init__(
        self, status: int, type: str, title: str, detail: str, errors: list[FieldError], body: dict[str, Any]
    ) -> None:
        super().__init__(f"{status} {title}: {detail}")
        self.status = status
        self.type = type
        self.title = title
        self.detail = detail
        self.errors = errors
        self.body = body

    @classmethod
    def from_response(cls, response: httpx.Response) -> ProblemError:
        """The error an error response stands for; a body that is not a problem document keeps its text."""
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            text = response.text.strip()[:500]
            body = {"type": "about:blank", "title": response.reason_phrase, "status": response.status_code}
            body["detail"] = text or response.reason_phrase
        errors: list[FieldError] = body["errors"] if isinstance(body.get("errors"), list) else []
        return cls(
            response.status_code,
            str(body.get("type", "about:blank")),
            str(body.get("title", response.reason_phrase)),
            str(body.get("detail", "")),
            errors,
            body,
        )


class TransportError(ClientError):
    """The server could not be reached, or the connection failed or timed out before an answer."""
