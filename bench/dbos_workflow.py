"""The DBOS side of ``bench/peers.py``: the approval scenario as a durable DBOS workflow on PostgreSQL.

:func:`approval_run` takes the conversation and the scripted model's tool call as its input (DBOS stores a
workflow's input before it runs), runs the model (a step that returns the tool call), publishes the call awaiting
approval (``DBOS.set_event``), and waits for a human's decision with ``DBOS.recv`` (a durable wait: its timeout is
recorded). Sent ``"approve"`` (``DBOS.send``), it runs the tool (a step) and answers ``done`` (a step). Each step's
output and the workflow's result are committed to DBOS's system tables as it goes.

Imported only by the DBOS side, so that ``bench.peers`` does not register workflows with DBOS unless it runs them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dbos import DBOS, DBOSConfig

TOPIC = "approval"  # what the human's decision is sent on
AWAITING = "awaiting_approval"  # the event the workflow sets to the tool call before it waits
WAIT_SECONDS = 120  # how long the workflow waits for a decision before it gives up


@DBOS.step()
def model(messages: list[dict[str, Any]], call: dict[str, Any]) -> dict[str, Any]:
    """The scripted model: whatever the conversation says, it calls the tool."""
    return call


@DBOS.step()
def write_file(args: dict[str, Any]) -> str:
    """The tool, once approved (nothing is written: every side's tool only answers)."""
    return "written"


@DBOS.step()
def answer(tool_result: str) -> str:
    """The scripted model's last turn, after the tool's answer."""
    return "done" if tool_result == "written" else "rejected"


@DBOS.workflow()
def approval_run(messages: list[dict[str, Any]], call: dict[str, Any]) -> str:
    """One run of the scenario: model, approval (a durable wait), tool, answer; its result is the last answer."""
    tool_call = model(messages, call)
    DBOS.set_event(AWAITING, tool_call)
    decision = DBOS.recv(TOPIC, timeout_seconds=WAIT_SECONDS)
    if decision != "approve":
        return answer("rejected")
    return answer(write_file(tool_call["args"]))


@contextmanager
def launched(url: str) -> Iterator[None]:
    """DBOS launched for the block with its system tables (schema ``dbos``) in the database at ``url``."""
    config: DBOSConfig = {"name": "hango-bench-peers", "system_database_url": url, "log_level": "WARNING"}
    DBOS(config=config)
    try:
        DBOS.launch()
        yield
    finally:
        # A workflow still running (after a Ctrl-C) is given time to end: once the database is dropped, its thread
        # would retry its writes for ever and hold the interpreter's exit up.
        DBOS.destroy(workflow_completion_timeout_sec=30)
