"""The typed Python client of the hango HTTP API.

from hango.client import Client

with Client("http://127.0.0.1:8000", token) as hango:
    run = hango.create_run(agent_id, "Remember I like tea.")
    for event in hango.run_events(run["id"]):
        print(event["type"], event["data"])
"""

from hango.client.client import Client
from hango.client.errors import ClientError, ProblemError, TransportError
from hango.client.types import (
    Agent,
    AgentWarning,
    Approval,
    ApprovalPreview,
    Decision,
    DecisionResult,
    Event,
    Grant,
    McpAnnotations,
    McpServer,
    McpServerTool,
    McpTool,
    Me,
    MultitaskStrategy,
    Page,
    Remember,
    Run,
    Thread,
    ThreadMessage,
    ThreadStatus,
)

__all__ = [
    "Agent",
    "AgentWarning",
    "Approval",
    "ApprovalPreview",
    "Client",
    "ClientError",
    "Decision",
    "DecisionResult",
    "Event",
    "Grant",
    "McpAnnotations",
    "McpServer",
    "McpServerTool",
    "McpTool",
    "Me",
    "MultitaskStrategy",
    "Page",
    "ProblemError",
    "Remember",
    "Run",
    "Thread",
    "ThreadMessage",
    "ThreadStatus",
    "TransportError",
]
