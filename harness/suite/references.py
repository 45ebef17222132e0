"""Published accept-length figures and named protocols, as data (`references.toml`,
`protocols.toml` beside this module; docs/references.md).

A reference is a figure someone published or a test's own threshold, with its source, pair,
hardware, engine and version, the protocol it was measured in and its definition. A
protocol is an engine's or a paper's acceptance test: the data sets and every workload
setting it fixes, the definition it gates on and its floor rule (floor = fraction x the
reference). Suites cite both by id; `harness.suite.protocol_checks` holds a suite to them.
"""

from __future__ import annotations

import tomllib
from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from harness.errors import BadInput
from harness.suite.entries import METRIC_DEFINITIONS, TemplateValue

HERE = Path(__file__).resolve().parent
REFERENCES_FILE = HERE / "references.toml"
PROTOCOLS_FILE = HERE / "protocols.toml"
ID_PATTERN = r"^[a-z0-9][a-z0-9_.\-]*$"
DEFINITIONS = tuple(METRIC_DEFINITIONS)  # the definitions a run computes from its rows


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


def _check_definition(definition: str) -> None:
    """A reference's or a protocol's definition: one the harness computes."""
    if definition not in DEFINITIONS:
        raise ValueError(f"definition {definition!r} is none the harness computes "
                         f"({', '.join(DEFINITIONS)})")


class Reference(_Strict):
    id: str = Field(pattern=ID_PATTERN)
    kind: Literal["measured", "threshold"]
    value: float = Field(ge=1.0)
    strict: bool = False  # a threshold the source asserts with `>`
    minimum: float | None = Field(default=None, ge=1.0)  # the source's own floor, if any
    accuracy: float | None = Field(default=None, ge=0.0, le=1.0)
    target: str = Field(min_length=1)
    draft: str | None = None  # None: the source does not name it
    dataset: str = Field(min_length=1)
    protocol: str = Field(pattern=ID_PATTERN)
    definition: str = Field(min_length=1)
    definition_basis: str = Field(min_length=1)  # why the definition is known
    engine: str = Field(min_length=1)
    version: str = Field(min_length=1)
    hardware: str = Field(min_length=1)
    source: str = Field(min_length=1)
    url: str | None = None
    file: str | None = None
    commit: str | None = Field(default=None, pattern=r"^[0-9a-f]{7,40}$")
    derived_from: str | None = None  # another reference this one scales or restates
    note: str | None = None

    @model_validator(mode="after")
    def _known_definition(self) -> Reference:
        _check_definition(self.definition)
        return self

    @property
    def pair(self) -> str:
        return f"{self.target} + {self.draft or '(draft not named)'}"


class FloorRule(_Strict):
    """floor = fraction x the reference's value; `strict`: the source asserts `>`."""

    fraction: float = Field(gt=0.0)
    strict: bool = False
    accuracy_strict: bool = False

    @field_validator("fraction")
    @classmethod
    def _at_most_all(cls, fraction: float) -> float:
        if fraction > 1.0:
            raise ValueError(f"{fraction:g} is above 100% of the reference: a floor above the "
                             "figure it is taken from fails a build that matches it")
        return fraction

    def floor(self, value: float) -> float:
        return self.fraction * value

    def describe(self) -> str:
        op = ">" if self.strict else ">="
        share = "the reference" if self.fraction == 1.0 else f"{self.fraction:.0%} of the reference"
        return f"accept length {op} {share}"


class ProtocolData(_Strict):
    """One data set of a protocol: the workload settings its source fixes."""

    name: str = Field(min_length=1)
    source_data: str = Field(min_length=1)  # what the source loads
    reference: str | None = None  # the reference its source gates this data set against
    fixed: dict[str, TemplateValue | list[str] | dict[str, TemplateValue]]


class Protocol(_Strict):
    id: str = Field(pattern=ID_PATTERN)
    title: str = Field(min_length=1)
    engine: str = Field(min_length=1)
    source: str = Field(min_length=1)
    commit: str | None = Field(default=None, pattern=r"^[0-9a-f]{7,40}$")
    also: list[str] = Field(default_factory=list)
    definition: str
    floor_rule: FloorRule
    pinned: str = Field(min_length=1)
    differences: list[str] = Field(default_factory=list)
    datasets: list[ProtocolData] = Field(min_length=1)

    @model_validator(mode="after")
    def _known_definition(self) -> Protocol:
        _check_definition(self.definition)
        return self

    def dataset(self, name: str) -> ProtocolData | None:
        return next((d for d in self.datasets if d.name == name), None)


class _ReferenceFile(_Strict):
    references: list[Reference]


class _ProtocolFile(_Strict):
    protocols: list[Protocol]


def _read(path: Path, model: type[_Strict]) -> _Strict:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        return model.model_validate(data)
    except OSError as error:
        raise BadInput(f"{path}: cannot read: {error.strerror}") from None
    except tomllib.TOMLDecodeError as error:
        raise BadInput(f"{path}: not TOML: {error}") from None
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        message = str(first["msg"]).removeprefix("Value error, ")
        raise BadInput(f"{path}: {where}: {message}") from None


@cache
def references(path: Path = REFERENCES_FILE) -> dict[str, Reference]:
    """The references table by id (BadInput naming the file and field when malformed)."""
    table = _read(path, _ReferenceFile)
    assert isinstance(table, _ReferenceFile)
    found: dict[str, Reference] = {}
    for i, reference in enumerate(table.references):
        if reference.id in found:
            raise BadInput(f"{path}: references.{i}.id: {reference.id!r} appears twice")
        found[reference.id] = reference
    return found


@cache
def protocols(path: Path = PROTOCOLS_FILE) -> dict[str, Protocol]:
    """The protocols table by id, each data set's reference checked against the
    references table (BadInput naming the file and field)."""
    table = _read(path, _ProtocolFile)
    assert isinstance(table, _ProtocolFile)
    known = references()
    found: dict[str, Protocol] = {}
    for i, protocol in enumerate(table.protocols):
        if protocol.id in found:
            raise BadInput(f"{path}: protocols.{i}.id: {protocol.id!r} appears twice")
        for j, data in enumerate(protocol.datasets):
            if data.reference is not None and data.reference not in known:
                raise BadInput(f"{path}: protocols.{i}.datasets.{j}.reference: no reference "
                               f"{data.reference!r} in {REFERENCES_FILE.name}")
        found[protocol.id] = protocol
    for reference in known.values():
        if reference.protocol not in found:
            raise BadInput(f"{REFERENCES_FILE}: reference {reference.id!r}: protocol "
                           f"{reference.protocol!r} is not in {path.name}")
    return found
