"""Globs compiled to RE2 mean what :mod:`fnmatch` means, and stay linear on hostile patterns."""

from __future__ import annotations

import random
from fnmatch import fnmatchcase

import pytest

from hango.agent.tools.base import ToolError
from hango.agent.tools.filesystem import _glob_matcher, _name_regex


def _random(rng: random.Random, alphabet: str, size: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, size)))


def test_segment_globs_agree_with_fnmatch() -> None:
    rng = random.Random(8)
    for _ in range(5_000):
        pattern = _random(rng, "ab*?[]!-\\.é", 8) or "*"
        name = _random(rng, "ab[]!-\\.é", 8)
        assert (_name_regex(pattern).fullmatch(name) is not None) == fnmatchcase(name, pattern), (pattern, name)


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("**/*.md", "/a.md", True),
        ("**/*.md", "/docs/deep/y.md", True),
        ("docs/**", "/docs/x.md", True),
        ("docs/**", "/docs", True),
        ("*.md", "/docs/x.md", False),
        ("/*/*.md", "/docs/x.md", True),
        ("[!x]/f", "/a/f", True),
        ("?/f", "/a/b/f", False),
        ("dir/", "/dir/f", False),
    ],
)
def test_path_globs(pattern: str, path: str, expected: bool) -> None:
    _, regex = _glob_matcher(pattern, "/")

    assert (regex.fullmatch(path) is not None) is expected


def test_hostile_globs_match_in_linear_time() -> None:
    # Each of these takes exponential or polynomial time on a backtracking matcher; RE2 answers at once.
    name = "a" * 5000
    for pattern in ["*a" * 50 + "b", "**/" * 500 + "*a" * 45 + "b", "?*" * 25 + "b"]:
        _, regex = _glob_matcher(pattern, "/")
        assert regex.fullmatch("/" + "/".join([name] * 20)) is None


def test_a_glob_too_large_for_re2_is_an_error_for_the_model() -> None:
    with pytest.raises(ToolError, match="RE2 instructions"):
        _glob_matcher("[a-z]" * 1000, "/")
