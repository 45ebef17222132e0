"""A document as parsed, before a schema reads it: TOML or JSON text to plain data, and the
limits no field of the schema can state.

- Nesting: at most `MAX_DEPTH` tables and arrays deep. A suite's deepest field
  (`workloads[i].floors.categories.<name>.accept_length`) lies 6 deep; the parsers
  recurse per level, so text nested a few hundred deep would end in a RecursionError
  (caught here, as a refusal) and a deep document would stall every walker after them.
- Numbers are finite: TOML (`inf`, `nan`) and Python's json (`Infinity`, `NaN`) read
  both, and no field of a suite means either (a timeout of `inf` never times out).
- Integers fit in 64 bits, as the TOML specification asks of a parser ("an integer that
  cannot be represented losslessly must be refused"; tomllib returns any Python int).

`DocumentError` names the field (`workload.max_tokens`, `floors.positions.0`); the caller
adds the file and its own error type.
"""

from __future__ import annotations

import json
import math
import tomllib

MAX_DEPTH = 16
INT_RANGE = (-(2**63), 2**63 - 1)  # TOML's integers: signed 64-bit


class DocumentError(ValueError):
    """Text that is no document, or a document past a limit above; `field` names where
    (empty for the text as a whole)."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}" if field else problem)
        self.field = field
        self.problem = problem


def _too_deep(kind: str) -> DocumentError:
    return DocumentError("", f"not valid {kind}: its arrays or tables nest too deep to parse "
                             f"(a document may nest {MAX_DEPTH} levels)")


def load_toml(text: str) -> dict[str, object]:
    """TOML text as a document whose values pass `check_values`."""
    try:
        document = tomllib.loads(text)
    except ValueError as error:  # TOMLDecodeError, or an integer of more than 4300 digits
        raise DocumentError("", f"not valid TOML: {error}") from None
    except RecursionError:  # tomllib recurses once per nested array or inline table
        raise _too_deep("TOML") from None
    check_values(document)
    return document


def load_json(text: str | bytes) -> object:
    """JSON text as data whose values pass `check_values`."""
    try:
        data = json.loads(text)
    except ValueError as error:  # JSONDecodeError, bytes not UTF-8, a 4300-digit integer
        raise DocumentError("", f"not valid JSON: {error}") from None
    except RecursionError:  # the decoder recurses once per nested array or object
        raise _too_deep("JSON") from None
    check_values(data)
    return data


def field_name(path: tuple[str | int, ...]) -> str:
    """`workloads.0.floors`, as the suite's messages name fields; a long path cut short."""
    parts = [str(part) for part in path]
    return ".".join(parts if len(parts) <= 8 else [*parts[:6], "...", parts[-1]])


def check_values(document: object) -> None:
    """DocumentError at the first value past a limit: nested deeper than `MAX_DEPTH`, a
    float that is not finite, an integer outside 64 bits. Iterative: any depth is safe."""
    pending: list[tuple[object, tuple[str | int, ...]]] = [(document, ())]
    while pending:
        value, path = pending.pop()
        if isinstance(value, dict | list):
            if len(path) >= MAX_DEPTH:
                raise DocumentError(field_name(path), f"nested more than {MAX_DEPTH} levels "
                                                      "deep; no field of a suite is")
            items = value.items() if isinstance(value, dict) else enumerate(value)
            pending += [(item, (*path, key)) for key, item in items]
        elif isinstance(value, float) and not math.isfinite(value):
            raise DocumentError(field_name(path), f"{value} is not a finite number; a suite's "
                                                  "numbers are finite")
        elif isinstance(value, int) and not isinstance(value, bool) and \
                not INT_RANGE[0] <= value <= INT_RANGE[1]:
            raise DocumentError(field_name(path), f"an integer of {value.bit_length()} bits "
                                                  "does not fit in 64 (TOML's integers)")
