"""Small MCP servers that hango's tests talk to, each one module, run as ``python -m tests.mcp_servers.NAME``.

Every server serves stdio by default, and streamable HTTP on 127.0.0.1 with ``--http PORT`` (at ``/mcp``). Each
takes its knobs from environment variables, documented in its module. All of them share one:

``RECORD_FILE``
    When set, every ``tools/call`` a server receives is appended to this file as one JSON line, before the tool
    runs and before its arguments are checked: ``{"event": "call", "tool", "arguments", "meta", "request_id",
    "pid"}``, where ``meta`` is the request's ``_meta`` exactly as sent. Some servers add lines of their own.

- ``recorder``: the well-behaved one (notes written and read under ``NOTES_DIR``).
- ``crasher``: dies in the middle of a call.
- ``hanger``: a call that never returns; records the cancellation it receives.
- ``garbage``: prints lines that are not JSON-RPC between its messages (stdio).
- ``flood``: floods stdout without a newline (stdio), or returns a result of any size.
- ``drifter``: a tool whose description changes while ``DRIFT_FILE`` exists.
- ``asker``: asks the client for sampling, elicitation and roots during a call, and reports the answers.
- ``annotated``: tools with every combination of annotations the default rule looks at.

``tests/support/mcp.py`` builds the operator-config entries and HTTP servers of these for the tests.
"""
