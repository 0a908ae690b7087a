"""Runnable agent definitions (the YAML files here) and the Python tools they use (``examples.tools``)."""
