"""Virtual filesystem paths: normalised once, the same way for tools and interrupt rules."""

from __future__ import annotations

AGENT_PREFIXES = ("/memories/", "/skills/")


class PathError(ValueError):
    """A path that is not absolute or that climbs above ``/``."""


def normalize_path(path: str) -> str:
    """Resolve ``.`` and ``..``, collapse repeated ``/``; refuse relative paths and paths escaping ``/``.

    A trailing ``/`` is kept, so ``/memories/`` stays a directory-looking prefix.
    """
    if not isinstance(path, str) or not path.startswith("/"):
        raise PathError(f"{path!r} is not an absolute path")
    if "\x00" in path:
        raise PathError("a path may not contain NUL characters")
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise PathError(f"{path!r} escapes /")
            parts.pop()
            continue
        parts.append(part)
    normalized = "/" + "/".join(parts)
    if path.endswith("/") and parts:
        normalized += "/"
    return normalized


def is_under(path: str, directory: str) -> bool:
    """Whether a normalised path is ``directory`` itself or inside it.

    A ``directory`` ending in ``/`` names a directory, so ``/memories/`` covers ``/memories``, ``/memories/`` and
    ``/memories/a`` but not ``/memoriesx``; any other ``directory`` is a plain string prefix.
    """
    if not directory.endswith("/"):
        return path.startswith(directory)
    return path.startswith(directory) or path == directory.rstrip("/")


def is_agent_path(path: str) -> bool:
    """Whether a normalised path belongs to the agent (persisting across runs) rather than to the run."""
    return any(is_under(path, prefix) for prefix in AGENT_PREFIXES)


def is_storage_root(path: str) -> bool:
    """Whether a normalised path is the agent storage directory itself (``/memories``), which holds no content."""
    return path.rstrip("/") in {prefix.rstrip("/") for prefix in AGENT_PREFIXES}
