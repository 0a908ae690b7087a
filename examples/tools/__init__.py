"""Custom tools of the examples, registered with ``HANGO_TOOL_MODULES=examples.tools.tickets``."""
