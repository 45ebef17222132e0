"""A parser fed any text gives a value or refuses it as bad input, never anything else."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from harness.errors import BadInput

Parsed = TypeVar("Parsed")


def parsed_or_refused(parse: Callable[[], Parsed], named: str = "") -> Parsed | None:
    """What `parse()` gives, or None where it refused with a BadInput whose message starts
    with `named`."""
    try:
        return parse()
    except BadInput as error:
        assert error.message.startswith(named), error.message
        return None
