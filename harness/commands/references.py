"""`harness references`: the references and protocols tables (harness.suite.references)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import TypeVar

from pydantic import BaseModel

from harness.errors import BadInput, ExitCode
from harness.suite.references import Protocol, Reference, protocols, references

Row = TypeVar("Row", bound=BaseModel)


def run(args: argparse.Namespace) -> int:
    table: Mapping[str, Protocol] | Mapping[str, Reference] = (
        protocols() if args.protocols else references())
    chosen = _chosen(table, args.ids, "protocol" if args.protocols else "reference")
    if args.json:
        print(json.dumps([row.model_dump(mode="json", exclude_none=True) for row in chosen],
                         indent=2))
        return ExitCode.PASS
    for row in chosen:
        if isinstance(row, Protocol):
            print(_protocol_text(row))
        elif isinstance(row, Reference):
            print(_reference_text(row))
    return ExitCode.PASS


def _chosen(table: Mapping[str, Row], ids: list[str], what: str) -> list[Row]:
    unknown = [i for i in ids if i not in table]
    if unknown:
        raise BadInput(f"no {what} {', '.join(map(repr, unknown))}; known: "
                       f"{', '.join(sorted(table))}")
    return [table[i] for i in ids] if ids else list(table.values())


def _reference_text(ref: Reference) -> str:
    op = ">" if ref.strict else ">="
    figure = (f"{ref.value:g}" if ref.kind == "measured" else f"{op} {ref.value:g} (a threshold)")
    lines = [f"{ref.id}: {figure} {ref.definition}",
             f"  pair       {ref.pair}",
             f"  data       {ref.dataset}; protocol {ref.protocol}",
             f"  engine     {ref.engine} {ref.version}; hardware {ref.hardware}",
             f"  source     {ref.source}"]
    where = ref.url or (f"{ref.file}@{ref.commit}" if ref.commit else ref.file)
    if where:
        lines.append(f"  at         {where}")
    lines.append(f"  definition {ref.definition_basis}")
    if ref.minimum is not None:
        lines.append(f"  minimum    {ref.minimum:g} (the source's own floor)")
    if ref.accuracy is not None:
        lines.append(f"  accuracy   {ref.accuracy:g}")
    for extra in (ref.derived_from and f"derived from {ref.derived_from}", ref.note):
        if extra:
            lines.append(f"  note       {extra}")
    return "\n".join(lines)


def _protocol_text(protocol: Protocol) -> str:
    lines = [f"{protocol.id}: {protocol.title}",
             f"  engine     {protocol.engine}; definition {protocol.definition}; floor rule "
             f"{protocol.floor_rule.describe()}",
             f"  source     {protocol.source}"
             + (f" @ {protocol.commit}" if protocol.commit else ""),
             *(f"  also       {also}" for also in protocol.also),
             f"  pinned     {protocol.pinned}"]
    for data in protocol.datasets:
        fixed = ", ".join(f"{k} = {json.dumps(v)}" for k, v in data.fixed.items()) or "-"
        cited = f"; reference {data.reference}" if data.reference else ""
        lines.append(f"  data set   {data.name}: {data.source_data}{cited}")
        lines.append(f"    fixes    {fixed}")
    lines.extend(f"  differs    {text}" for text in protocol.differences)
    return "\n".join(lines)
