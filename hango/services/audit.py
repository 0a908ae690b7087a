"""Audit services: record rows outside a request (system actions) and list a tenant's trail."""

from __future__ import annotations

from hango.kernel.auth import Principal
from hango.kernel.models import AuditEvent
from hango.kernel.pagination import Page, PageRequest
from hango.platform.db import Database
from hango.services.tenancy import require_manager
from hango.store.audit import AuditFilter, AuditRecord, insert_audit_events, list_audit_events


def record(db: Database, records: list[AuditRecord]) -> None:
    """Write audit rows in their own transaction."""
    if records:
        with db.transaction() as session:
            insert_audit_events(session, records)


def list_events(db: Database, principal: Principal, filters: AuditFilter, page: PageRequest) -> Page[AuditEvent]:
    """The tenant's audit trail, newest first (owners and admins only)."""
    require_manager(principal)
    with db.transaction() as session:
        return list_audit_events(session, principal.tenant_id, filters, page)
