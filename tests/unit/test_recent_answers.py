"""The keep-alive checks' shared answers: kept for their TTL, and computed once for every caller asking together
(real threads, as a gevent worker's greenlets would ask)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from hango.streams.checks import Recent


def test_callers_asking_together_share_one_computation() -> None:
    answers: Recent[int] = Recent(ttl=60)
    calls = 0
    start = threading.Barrier(20)

    def compute() -> int:
        nonlocal calls
        calls += 1
        time.sleep(0.2)  # a query: every other caller arrives while it runs
        return 42

    def ask() -> int:
        start.wait()
        return answers.get("token", compute)

    for _ in range(3):
        answers = Recent(ttl=60)
        calls = 0
        with ThreadPoolExecutor(20) as pool:
            results = list(pool.map(lambda _: ask(), range(20)))
        assert results == [42] * 20
        assert calls == 1


def test_an_answer_is_kept_for_its_ttl_then_computed_again() -> None:
    answers: Recent[int] = Recent(ttl=0.2)
    values = iter(range(10))
    assert answers.get("k", lambda: next(values)) == 0
    assert answers.get("k", lambda: next(values)) == 0
    time.sleep(0.25)
    assert answers.get("k", lambda: next(values)) == 1


def test_a_failed_computation_is_not_shared_or_kept() -> None:
    answers: Recent[int] = Recent(ttl=60)
    entered, release = threading.Event(), threading.Event()

    def failing() -> int:
        entered.set()
        release.wait(5)
        raise ConnectionError("the database went away")

    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(answers.get, "k", failing)
        assert entered.wait(5)
        second = pool.submit(answers.get, "k", lambda: 7)  # waits for the first, then computes on its own
        time.sleep(0.1)
        release.set()
        with pytest.raises(ConnectionError):
            first.result(5)
        assert second.result(5) == 7
    assert answers.get("k", lambda: 8) == 7
