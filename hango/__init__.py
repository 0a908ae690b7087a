"""hango: a multi-tenant agent runtime server with durable human-in-the-loop approvals."""

__version__ = "0.1.0"
