"""Approvals: the decision service in parts.

- :mod:`.commands`: the request as frozen values, built at the edge (:mod:`hango.api.decision_requests`).
- :mod:`.checks`: the checks, functions of the command and the locked approvals.
- :mod:`.audit`: what the audit trail says of a decision and of a refusal.
- :mod:`.service`: the unit of work that runs them and makes the transition, and the approval lists.
"""

from hango.services.approvals.audit import NamedApproval, audit_detail, named_approvals
from hango.services.approvals.service import Decided, decide, list_for_run, list_for_tenant

__all__ = ["Decided", "NamedApproval", "audit_detail", "decide", "list_for_run", "list_for_tenant", "named_approvals"]
