"""The tool-call deadline: the main thread's timer, the cooperative check, shielded sections, and cleanup."""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from types import FrameType

import pytest

from hango.agent import deadline


def _spin() -> None:
    """Pure-Python work that never ends by itself and never calls check()."""
    while True:
        pass


@pytest.fixture(autouse=True)
def _no_timer_left() -> Iterator[None]:
    # Whatever a test does, the timer it armed is gone afterwards and the previous one (pytest-timeout's) is back.
    before = signal.getitimer(signal.ITIMER_REAL)
    yield
    after = signal.getitimer(signal.ITIMER_REAL)
    assert (after[0] > 0) == (before[0] > 0)


def test_the_timer_interrupts_a_sleep() -> None:
    with pytest.raises(deadline.DeadlineExceeded), deadline.within(0.05):
        time.sleep(30)


def test_the_timer_interrupts_a_pure_python_loop() -> None:
    with pytest.raises(deadline.DeadlineExceeded), deadline.within(0.05):
        _spin()


def test_a_broad_except_exception_cannot_swallow_the_deadline() -> None:
    def stubborn() -> None:
        with contextlib.suppress(Exception):  # what a careless tool does
            time.sleep(30)

    with pytest.raises(deadline.DeadlineExceeded), deadline.within(0.05):
        stubborn()


def test_a_shielded_section_finishes_and_the_deadline_is_raised_at_its_end() -> None:
    steps: list[str] = []

    def work() -> None:
        with deadline.shielded():
            time.sleep(0.2)
            steps.append("shielded work finished")
        steps.append("went on past the deadline")

    with pytest.raises(deadline.DeadlineExceeded), deadline.within(0.05):
        work()
    assert steps == ["shielded work finished"]


def test_the_timer_is_disarmed_when_the_block_ends_early() -> None:
    with deadline.within(0.05):
        pass
    time.sleep(0.1)  # a timer left armed would raise here
    deadline.check()


def test_the_timer_is_disarmed_when_the_block_raises() -> None:
    with pytest.raises(ValueError, match="boom"), deadline.within(0.05):
        raise ValueError("boom")
    time.sleep(0.1)
    deadline.check()


def test_a_previous_timer_is_given_back() -> None:
    fired: list[int] = []

    def outer(signum: int, frame: FrameType | None) -> None:
        fired.append(signum)

    previous = signal.signal(signal.SIGALRM, outer)
    saved = signal.setitimer(signal.ITIMER_REAL, 0.3)
    try:
        with deadline.within(5):
            pass
        assert signal.getsignal(signal.SIGALRM) is outer
        assert 0 < signal.getitimer(signal.ITIMER_REAL)[0] <= 0.3
    finally:
        signal.setitimer(signal.ITIMER_REAL, *saved)
        signal.signal(signal.SIGALRM, previous)


def test_off_the_main_thread_the_deadline_is_cooperative() -> None:
    outcome: list[str] = []

    def work() -> None:
        try:
            with deadline.within(0.05):
                while True:
                    deadline.check()
        except deadline.DeadlineExceeded:
            outcome.append("stopped")

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(timeout=30)
    assert outcome == ["stopped"]


def test_check_outside_a_deadline_does_nothing() -> None:
    deadline.check()
    with deadline.shielded():
        deadline.check()
