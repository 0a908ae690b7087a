"""Audit of every mutating request, written from one place: the end of the request.

A view declares its action and target kind with :func:`audited`; while it runs it may name concrete targets
(one row each) with :func:`audit_target`. Whatever happens — success, 400, 401, 403, 404, 409, 413, 500 — the
``after_request`` hook writes the rows with the outcome taken from the response status.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from flask import Flask, Response, current_app, g, request
from sqlalchemy.exc import SQLAlchemyError

from hango.api.context import services, trace_id
from hango.kernel.auth import Principal
from hango.kernel.models import Outcome
from hango.services import audit
from hango.store.audit import AuditRecord

log = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Any])
MUTATING_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_ATTRIBUTE = "_hango_audit"


@dataclass(frozen=True)
class AuditSpec:
    """What a view does, declared once: the action, the kind of target and the URL argument naming it."""

    action: str
    target_kind: str
    target_arg: str | None = None


@dataclass(frozen=True)
class Target:
    """One audited target with a safe detail (no secrets, no tool arguments, no human messages).

    ``action`` overrides the view's action for this row (a request may do more than one kind of thing).
    """

    kind: str
    id: str | None
    detail: dict[str, Any] = field(default_factory=dict)
    action: str | None = None


def audited(action: str, target_kind: str, target_arg: str | None = None) -> Callable[[F], F]:
    """Declare the audit action of a view; ``target_arg`` names the URL argument holding the target id."""

    def mark(view: F) -> F:
        setattr(view, _ATTRIBUTE, AuditSpec(action, target_kind, target_arg))
        return view

    return mark


def audit_target(kind: str, target_id: object, *, action: str | None = None, **detail: Any) -> None:
    """Name a target of the current request; each named target gets its own row."""
    g.setdefault("audit_targets", []).append(Target(kind, str(target_id), detail, action))


def audit_written() -> None:
    """The service already wrote this request's rows in its own transaction; the hook must not repeat them.

    Set by a view after a service succeeded, and by the problem handler for an error the service audited. Other
    refusals (4xx, 5xx) are still audited by the hook, from the targets the view declared.
    """
    g.audit_written = True


def outcome_for(status: int) -> Outcome:
    """``success`` below 400, ``denied`` for 401 and 403, ``error`` otherwise."""
    if status < 400:
        return "success"
    return "denied" if status in (401, 403) else "error"


def _spec() -> AuditSpec:
    view = current_app.view_functions.get(request.endpoint or "")
    while view is not None:
        spec = getattr(view, _ATTRIBUTE, None)
        if isinstance(spec, AuditSpec):
            return spec
        view = getattr(view, "__wrapped__", None)
    return AuditSpec("http.request", "endpoint")


def _targets(spec: AuditSpec) -> list[Target]:
    named: list[Target] = g.get("audit_targets", [])
    if named:
        return named
    view_args = request.view_args or {}
    if spec.target_arg and spec.target_arg in view_args:
        return [Target(spec.target_kind, str(view_args[spec.target_arg]))]
    if spec.action == "http.request":
        return [Target("endpoint", f"{request.method} {request.path}")]
    return [Target(spec.target_kind, None)]


def records_for(status: int) -> list[AuditRecord]:
    """The audit rows of the current request, given its response status."""
    spec = _spec()
    caller: Principal | None = g.get("principal")
    outcome = outcome_for(status)
    base_detail: dict[str, Any] = {} if outcome == "success" else {"status": status}
    return [
        AuditRecord(
            tenant_id=caller.tenant_id if caller else None,
            actor_kind="user",
            actor_id=caller.user_id if caller else None,
            action=target.action or spec.action,
            target_kind=target.kind,
            target_id=target.id,
            outcome=outcome,
            detail={**target.detail, **base_detail},
            trace_id=trace_id(),
        )
        for target in _targets(spec)
    ]


def _write(response: Response) -> Response:
    if request.method not in MUTATING_METHODS or g.get("audit_written"):
        return response
    try:
        audit.record(services().db, records_for(response.status_code))
    except (SQLAlchemyError, ValueError):
        # The change itself is already committed; failing the response now would mislead the client.
        log.exception("could not write the audit rows of %s %s", request.method, request.path)
    return response


def register(app: Flask) -> None:
    """Write the audit rows of every mutating request after its response is decided."""
    app.after_request(_write)
