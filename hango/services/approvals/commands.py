"""The decision service's commands: a decision request read once, at the edge (:mod:`hango.api.decision_requests`),
into frozen values with one identity for every call it names.

The body of ``POST /v1/runs/{id}/approvals`` names each call by ``approval_id`` (a UUID in any spelling: upper
case, braces, ``urn:uuid:``, without hyphens) or by ``tool_call_id`` (a string, compared exactly). Both are parsed
once into a :class:`CallRef` whose ``approval_id`` is a :class:`uuid.UUID`; every later check — who may decide,
quorum votes, self-approval, digests, completeness, the audit rows — compares those values and never a request
string. Two spellings of one id are how a request would slip between two checks that each looked right.

A malformed body is a command too (:class:`Malformed`), still carrying the calls it names as far as they can be
read: the service answers 404 and 403 before it says how the body is malformed.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from hango.kernel.errors import InvalidInput
from hango.kernel.models import Decision as DecisionKind

NEEDS_MESSAGE = ("reject", "respond")


@dataclass(frozen=True)
class CallRef:
    """How a decision names its call: the approval's id as a UUID, the call's id as given, or both."""

    approval_id: uuid.UUID | None = None
    tool_call_id: str | None = None


@dataclass(frozen=True)
class NamedCall:
    """A call a body names, read leniently (for the reviewers check and the audit rows): how it is named, and the
    decision asked for it when that is one of the four (with its ``args``, for an edit)."""

    ref: CallRef
    decision: DecisionKind | None = None
    args: Any = None


@dataclass(frozen=True)
class Remember:
    """``remember`` on an approve: a grant for ``ttl``; ``when`` None covers every call of the tool, and an
    omitted ``when`` (``exact``) exactly the call approved."""

    ttl: str
    when: dict[str, Any] | None = None
    exact: bool = True


@dataclass(frozen=True)
class DecisionCommand:
    """One decision, valid as far as the body alone can tell."""

    ref: CallRef
    kind: DecisionKind
    args: dict[str, Any] | None = None
    message: str = ""
    arguments_sha256: str | None = None
    remember: Remember | None = None


@dataclass(frozen=True)
class DecisionRequest:
    """A well-formed decision request: the calls it names, and its decisions."""

    named: tuple[NamedCall, ...]
    decisions: tuple[DecisionCommand, ...]


@dataclass(frozen=True)
class Malformed:
    """A request whose body did not load: the calls it names as far as they can be read, and why it is malformed
    (a 400 the service raises once the 404 and 403 checks passed)."""

    named: tuple[NamedCall, ...]
    error: InvalidInput


Request = DecisionRequest | Malformed
