"""The walk of one request through hango's modules, recorded from the interpreter's profile hook.

A *step* is a call from code in one hango module into code in another (library frames in between are looked
through: a schema hook that marshmallow calls counts as a step from the module that called marshmallow). The walk
starts when a function named ``start`` is entered and ends at the first database commit after that. A step into a
module the walk has already entered is a *return* to it; a step back to the caller, when a call ends, is not a
step at all.
"""

from __future__ import annotations

import sys
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


@dataclass
class Walk:
    """The steps of one walk, in order: (from module, to module)."""

    steps: list[tuple[str, str]] = field(default_factory=list)
    committed: bool = False

    def edges(self, ignore: tuple[str, ...] = ()) -> list[tuple[str, str]]:
        """The distinct steps, in the order of their first occurrence."""
        return list(dict.fromkeys(self._steps(ignore)))

    def entered_twice(self, ignore: tuple[str, ...] = ()) -> dict[str, list[str]]:
        """The modules entered from more than one module, with those modules."""
        callers: dict[str, list[str]] = {}
        for source, target in self.edges(ignore):
            callers.setdefault(target, []).append(source)
        return {module: found for module, found in callers.items() if len(found) > 1}

    def visits(self, ignore: tuple[str, ...] = ()) -> list[str]:
        """The modules entered, in the order of their first entry (the edge first)."""
        seen: list[str] = []
        for source, target in self._steps(ignore):
            for module in (source, target):
                if module not in seen:
                    seen.append(module)
        return seen

    def returns(self, ignore: tuple[str, ...] = ()) -> list[tuple[str, str]]:
        """The steps into a module the walk had already entered."""
        entered: set[str] = set()
        again = []
        for index, (source, target) in enumerate(self._steps(ignore)):
            if index == 0:
                entered.add(source)
            if target in entered:
                again.append((source, target))
            entered.add(target)
        return again

    def _steps(self, ignore: tuple[str, ...]) -> list[tuple[str, str]]:
        return [(s, t) for s, t in self.steps if not t.startswith(ignore) and not s.startswith(ignore)]


@contextmanager
def walking(start: tuple[str, str]) -> Iterator[Walk]:
    """Record the walk that begins when ``start`` (module, function) is called, until the first commit."""
    walk = Walk()
    stack: list[str] = []  # the hango module of each open hango frame, innermost last
    frames: list[FrameType] = []
    recording = False

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        nonlocal recording
        if walk.committed or event not in ("call", "return"):
            return
        module = frame.f_globals.get("__name__", "")
        if event == "call" and recording and frame.f_code.co_name == "commit" and module == "sqlalchemy.orm.session":
            walk.committed = True
            return
        if not module.startswith("hango."):
            return
        if event == "call":
            if not recording and (module, frame.f_code.co_name) == start:
                recording = True
            elif recording and stack and stack[-1] != module:
                walk.steps.append((stack[-1], module))
            stack.append(module)
            frames.append(frame)
        elif frames and frames[-1] is frame:
            stack.pop()
            frames.pop()

    sys.setprofile(profile)
    try:
        yield walk
    finally:
        sys.setprofile(None)
    assert recording, f"{start} was never called"
    assert walk.committed, "the walk never reached a commit"


def layers() -> list[list[str]]:
    """The main layers contract of pyproject.toml, top first: each layer's containers."""
    config = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]["contracts"][0]
    return [[name.strip() for name in layer.replace(":", "|").split("|")] for layer in config["layers"]]


def rank(module: str, order: list[list[str]]) -> int:
    """The index of the layer a module belongs to (its longest matching container)."""
    best, found = -1, -1
    for index, containers in enumerate(order):
        for container in containers:
            if (module == container or module.startswith(container + ".")) and len(container) > best:
                best, found = len(container), index
    assert found >= 0, f"{module} is in no layer"
    return found
