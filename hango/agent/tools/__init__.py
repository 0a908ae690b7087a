"""Tools: typed values with a JSON Schema, a registry, and the built-in filesystem tools."""
