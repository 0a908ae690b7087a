"""The composition root: what every service of a process needs (database, Redis, the run and delivery queues, the
event publisher, the tool registry, the MCP sessions), built once per process by an edge. The unit of work is
:mod:`hango.platform.work`."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import redis

from hango.agent.tools.base import ToolRegistry
from hango.agent.tools.filesystem import builtin_registry
from hango.agent.tools.task import TASK_TOOL
from hango.kernel.config import Settings
from hango.mcp.client import McpClients
from hango.mcp.config import load_operator_servers
from hango.platform.db import Database
from hango.platform.events import Publisher
from hango.platform.queue import DeliveryQueue, RunQueue, make_celery

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Runtime:
    """The process's database, Redis, run queue, event publisher and tool registry."""

    settings: Settings
    db: Database
    redis: redis.Redis
    queue: RunQueue
    publisher: Publisher
    tools: ToolRegistry
    deliveries: DeliveryQueue
    mcp: McpClients

    @classmethod
    def build(cls, settings: Settings, *, db: Database | None = None) -> Runtime:
        """Wire a runtime from settings; nothing connects until first use.

        Raises:
            ConfigError: ``HANGO_MCP_CONFIG`` names a file that is malformed (the message names the entry).
        """
        operator_servers = load_operator_servers(settings.mcp_config, os.environ)
        # A bounded pool: a burst of greenlets (a thousand streams closing together) waits for a connection
        # instead of opening hundreds, each costing a TCP handshake and redis-py's start-up work.
        pool = redis.BlockingConnectionPool.from_url(
            settings.require_redis_url(),
            max_connections=settings.redis_max_connections,
            timeout=5,
            socket_timeout=5,
            socket_connect_timeout=5,
        )
        client = redis.Redis(connection_pool=pool)
        tools = tool_registry(settings)
        celery = make_celery(settings)
        return cls(
            settings=settings,
            db=db
            or Database(
                settings.require_database_url(),
                pool_size=settings.db_pool_size,
                ping_after_idle=settings.db_ping_after_idle,
                timeouts=settings.session_timeouts(),
            ),
            redis=client,
            queue=RunQueue(settings, client, celery),
            publisher=Publisher(client),
            tools=tools,
            deliveries=DeliveryQueue(settings, celery),
            mcp=McpClients(settings, operator_servers),
        )


def tool_registry(settings: Settings) -> ToolRegistry:
    """The built-in tools, ``task``, the installed plugins' tools and those of ``HANGO_TOOL_MODULES``."""
    tools = builtin_registry()
    tools.add(TASK_TOOL)
    tools.load_entry_points()
    tools.load_modules(settings.tool_modules)
    return tools
