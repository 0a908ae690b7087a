"""A short tour of a running hango API, printed step by step (used by deploy/quickstart.sh)."""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request
import uuid
from typing import Any


def call(base: str, method: str, path: str, token: str | None = None, body: Any = None) -> tuple[int, Any]:
    """One HTTP request; returns the status and the decoded JSON body."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(base + path, data=data, method=method)  # noqa: S310 (loopback only)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def wait_until_ready(base: str) -> None:
    """Poll /readyz until the server answers, for at most 30 seconds."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if call(base, "GET", "/readyz")[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    sys.exit("the API did not become ready")


def show(step: str, status: int, body: Any) -> None:
    """Print one step of the tour."""
    print(f"\n== {step}: HTTP {status}")
    print(json.dumps(body, indent=2)[:1200])


def main(base: str, owner_token: str) -> None:
    """Create a member, show the member's 403 on an owner-only list, then the audit trail."""
    wait_until_ready(base)
    email = f"member-{uuid.uuid4().hex[:6]}@example.com"
    status, member = call(base, "POST", "/v1/users", owner_token, {"email": email, "role": "member"})
    show("owner creates a member", status, member)
    show("the member lists users (owners and admins only)", *call(base, "GET", "/v1/users", member["token"]))
    show("the owner lists users", *call(base, "GET", "/v1/users?limit=5", owner_token))
    show("the audit trail, newest first", *call(base, "GET", "/v1/audit-events?limit=3", owner_token))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
