"""How old a series' latest night is (`harness trend` and `harness paired`, `--max-age`).

A night killed before its run folder existed leaves no trace in the results: the series'
latest night is then the one before, and only its age tells. Each report prints the
latest night's time and age; `--max-age` makes a series whose latest night is older than
expected an error (exit 3), so such a night is caught.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from harness.errors import BadInput

_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def parse_age(text: str) -> timedelta:
    """`--max-age` as given: a number and a unit, s, m, h or d (e.g. 26h, 2d)."""
    found = _AGE.match(text)
    if not found or float(found.group(1)) <= 0:
        raise BadInput(f"--max-age {text!r}: not a positive age such as 26h, 90m or 2d")
    return timedelta(**{_UNITS[found.group(2)]: float(found.group(1))})


def as_utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def age_text(age: timedelta) -> str:
    """An age to read at a glance: 3d 4h, 5h 12m, 40m."""
    minutes = max(0, int(age.total_seconds() // 60))
    days, rest = divmod(minutes, 24 * 60)
    hours, minutes = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    return f"{hours}h {minutes}m" if hours else f"{minutes}m"


def latest_night_text(latest: datetime | None, now: datetime) -> str:
    """"2026-12-05 02:17 UTC (1d 3h ago)", or "no night"."""
    if latest is None:
        return "no night"
    latest = as_utc(latest)
    return f"{latest:%Y-%m-%d %H:%M} UTC ({age_text(now - latest)} ago)"


def overdue_reason(latest: datetime | None, now: datetime, max_age: timedelta | None
                   ) -> str | None:
    """Why a series is stale under `--max-age` (None: it is not, or no limit)."""
    if max_age is None:
        return None
    if latest is None:
        return "no night recorded"
    age = now - as_utc(latest)
    if age <= max_age:
        return None
    return (f"latest night {latest_night_text(latest, now)} is older than --max-age "
            f"{age_text(max_age)}: a night since then left no record (killed before its "
            "run folder existed?)")
