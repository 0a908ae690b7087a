"""Middleware: the only place cross-cutting behaviour of the loop lives."""
