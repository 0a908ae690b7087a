"""Regular expressions of what the services parse, written for OpenAPI's ``pattern`` (ECMA-262) and Python alike."""

from __future__ import annotations

import math
from datetime import timedelta

# Python's str.strip() removes exactly these characters; a value made only of them is blank to the services.
NOT_BLANK = r"[^\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
_SPACE = "[ \\t\\n\\r\\f\\v]*"
_UNITS = (("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0), ("d", 86400.0))


def duration_pattern(maximum: timedelta) -> str:
    """A duration as :func:`hango.kernel.config.parse_duration` reads it, above zero and at most ``maximum``.

    Whole numbers of a unit (``ms``, ``s``, ``m``, ``h``, ``d``; seconds without one), with decimals down to a
    thousandth of the unit: the parser also takes smaller fractions, which round to nothing or to a microsecond.
    """
    branches = []
    for unit, size in _UNITS:
        number = _positive_at_most(maximum.total_seconds() / size)
        if number is not None:
            branches.append(f"{number}{_SPACE}{unit}?" if unit == "s" else f"{number}{_SPACE}{unit}")
    return f"^{_SPACE}(?:{'|'.join(branches)}){_SPACE}$"


def _positive_at_most(limit: float) -> str | None:
    """Decimal numbers in (0, ``limit``], leading zeros allowed; ``None`` when ``limit`` is below 1."""
    whole = math.floor(limit)
    if whole < 1:
        return None
    fractions = [r"0+\.0{0,2}[1-9][0-9]*"]
    if whole > 1:
        fractions.append(f"0*{whole_numbers_up_to(whole - 1)}(?:\\.[0-9]+)?")
    fractions.append(f"0*{whole}(?:\\.0+)?")
    return f"(?:{'|'.join(fractions)})"


def whole_numbers_up_to(limit: int) -> str:
    """The whole numbers 1 to ``limit`` written without leading zeros."""
    digits = str(limit)
    options = [f"[1-9]{_digits(len(digits) - 2, up_to=True)}"] if len(digits) > 1 else []
    for index, digit in enumerate(digits):
        low, high = (1 if index == 0 else 0), int(digit) - 1
        if high >= low:
            choice = str(low) if low == high else f"[{low}-{high}]"
            options.append(digits[:index] + choice + _digits(len(digits) - index - 1))
    options.append(digits)
    return f"(?:{'|'.join(options)})"


def _digits(count: int, *, up_to: bool = False) -> str:
    if count == 0:
        return ""
    if up_to:
        return f"[0-9]{{0,{count}}}"
    return "[0-9]" if count == 1 else f"[0-9]{{{count}}}"
