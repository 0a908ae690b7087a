"""Deadlines for tool calls: how a call that runs too long is ended without ending the worker.

In the main thread, where Celery's prefork children run their tasks, a ``SIGALRM`` timer raises
:class:`DeadlineExceeded` inside the running handler wherever it is: sleeping, looping in Python, or backtracking
in :mod:`re`. No signal reaches another thread, so there the deadline is cooperative: code that iterates calls
:func:`check`, as the built-in ``grep`` and ``glob`` do at every file and line.

:class:`DeadlineExceeded` derives from :class:`BaseException`, so that a tool's own ``except Exception`` cannot
swallow it. SQLAlchemy treats such an exception inside a statement as a lost connection and invalidates it, which
would end the transaction the whole batch shares; database work therefore runs :func:`shielded`, and a deadline
passing there is raised as soon as the section ends.
"""

from __future__ import annotations

import functools
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import ParamSpec, TypeVar

_P = ParamSpec("_P")
_R = TypeVar("_R")
# The smallest delay setitimer accepts as "arm" (zero disarms).
_SOONEST = 1e-6


class DeadlineExceeded(BaseException):
    """The running tool call passed its deadline."""


@dataclass
class _Deadline:
    at: float
    shields: int = 0
    expired: bool = False

    def passed(self) -> bool:
        return self.expired or time.monotonic() >= self.at


class _Current(threading.local):
    deadline: _Deadline | None = None


_current = _Current()


def check() -> None:
    """Raise :class:`DeadlineExceeded` when the current call's deadline has passed; a no-op without one."""
    deadline = _current.deadline
    if deadline is not None and deadline.shields == 0 and deadline.passed():
        raise DeadlineExceeded


@contextmanager
def shielded() -> Iterator[None]:
    """A section the timer must not interrupt (database work); a deadline passed inside is raised at its end."""
    deadline = _current.deadline
    if deadline is None:
        yield
        return
    deadline.shields += 1
    try:
        yield
    finally:
        deadline.shields -= 1
    check()


def shielded_call(function: Callable[_P, _R]) -> Callable[_P, _R]:
    """Decorate a function so that it always runs :func:`shielded`."""

    @functools.wraps(function)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with shielded():
            return function(*args, **kwargs)

    return wrapper


@contextmanager
def within(seconds: float) -> Iterator[None]:
    """Run the block under a deadline ``seconds`` from now (never later than an enclosing deadline).

    The timer is disarmed, and whatever timer ran before is given back, however the block ends.
    """
    outer = _current.deadline
    at = time.monotonic() + seconds
    deadline = _Deadline(at if outer is None else min(at, outer.at))
    _current.deadline = deadline
    disarm = _arm(deadline) if threading.current_thread() is threading.main_thread() else None
    try:
        yield
    finally:
        if disarm is not None:
            disarm()
        _current.deadline = outer


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    deadline = _current.deadline
    if deadline is None:
        return
    deadline.expired = True
    if deadline.shields == 0:
        raise DeadlineExceeded


def _arm(deadline: _Deadline) -> Callable[[], None]:
    """Start the ``SIGALRM`` timer for ``deadline``; returns what disarms it and restores the previous timer."""
    previous_handler = signal.signal(signal.SIGALRM, _on_alarm)
    started = time.monotonic()
    previous_delay, previous_interval = signal.setitimer(signal.ITIMER_REAL, max(deadline.at - started, _SOONEST))

    def disarm() -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        if callable(previous_handler):
            signal.signal(signal.SIGALRM, previous_handler)
        # Otherwise the previous disposition was the default (end the process) or ignore; our handler stays, and
        # does nothing without a deadline, so that a signal already on its way cannot kill the worker.
        if previous_delay > 0:
            # Someone else's timer (an enclosing deadline, a test runner's) was running: give it what it had left.
            left = previous_delay - (time.monotonic() - started)
            signal.setitimer(signal.ITIMER_REAL, max(left, _SOONEST), previous_interval)

    return disarm
