"""Durations as people write them in environment variables and on the command line: `30s`, `5m`, `1h30m`, `2d`.

A bare number is seconds. One parser for the worker's drain period, schedule intervals, jitter and offsets,
so every place accepts the same spellings and refuses the others with the same one-line error.
"""

from __future__ import annotations

import re
from datetime import timedelta

_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_PARTS = re.compile(rf"(?:{_PART.pattern})+")


def parse_duration(text: str, *, what: str = "duration") -> timedelta:
    """`30s`, `5m`, `1h30m`, `2d`, `250ms` or a bare number of seconds; `ValueError` with one line otherwise."""
    value = text.strip().lower().replace(" ", "")
    if not value:
        raise ValueError(f"{what} is empty (e.g. 30s, 5m, 1h30m)")
    try:
        seconds = float(value)
    except ValueError:
        if not _PARTS.fullmatch(value):
            raise ValueError(f"{what} must be a duration such as 30s, 5m, 1h30m or 2d, not {text!r}") from None
        seconds = sum(float(number) * _UNITS[unit] for number, unit in _PART.findall(value))
    if seconds < 0:
        raise ValueError(f"{what} must not be negative, not {text!r}")
    return timedelta(seconds=seconds)


def format_duration(value: timedelta) -> str:
    """The shortest spelling `parse_duration` reads back: `30s`, `5m`, `1h30m`."""
    seconds = value.total_seconds()
    if seconds != int(seconds):
        return f"{seconds:g}s"
    rest, parts = int(seconds), []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size:
            parts.append(f"{rest // size}{unit}")
            rest %= size
    return "".join(parts) or "0s"
