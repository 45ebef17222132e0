"""A suite held to the protocols it reproduces and the references it cites
(harness/suite/protocols.toml, references.toml; `harness.suite.references`).

Per entry (`[workload]` with `[floors]` and `[[baselines]]`, each `[[workloads]]` with its
own): a declared `reproduces` names a protocol and one of its data sets, and every workload
setting that data set fixes must be the entry's; the floors are in the protocol's definition
and cite the data set's reference, the accept-length floor being the protocol's floor rule
applied to it. A cited reference (floors or baseline) must have the suite's pair and the
entry's protocol and definition. Each refusal names the field, the entry's value and the
other side's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.suite.entries import Baseline, Floors, Workload, impossible
from harness.suite.references import Protocol, Reference, protocols, references
from harness.suite.serving import ModelRef

TOLERANCE = 1e-6  # a floor equals its rule's figure to this relative tolerance


@dataclass(frozen=True)
class EntryParts:
    workload: Workload
    floors: Floors
    baselines: Sequence[Baseline]
    where: str  # "" for the main entry, "workloads.<name>." for the others
    workload_where: str  # "workload." or "workloads.<name>."


def check_entry(parts: EntryParts, target: ModelRef | None, draft: ModelRef | None) -> None:
    """Raise a PydanticCustomError naming the field when the entry departs from its
    protocol or a cited reference."""
    protocol = _protocol(parts)
    floors, where = parts.floors, parts.where
    if protocol is not None:
        if floors.metric != protocol.definition:
            raise impossible(f"{where}floors.metric",
                             f"{floors.metric!r}, but protocol {protocol.id!r} gates on "
                             f"{protocol.definition!r} ({protocol.source})")
        data = protocol.dataset(parts.workload.reproduces.dataset)  # type: ignore[union-attr]
        if data is not None and data.reference is not None and floors.reference is None:
            raise impossible(f"{where}floors.reference",
                             f"missing: protocol {protocol.id!r} takes its floor from "
                             f"{data.reference!r} ({protocol.floor_rule.describe()})")
    if floors.reference is not None:
        reference = _reference(f"{where}floors.reference", floors.reference)
        _same_sides(f"{where}floors.reference", reference, parts, floors.metric, protocol,
                    target, draft)
        if protocol is not None:
            _floor_by_rule(where, floors, reference, protocol)
    for i, baseline in enumerate(parts.baselines):
        if baseline.protocol is not None:
            _other_protocol(f"{where}baselines.{i}.protocol", baseline.protocol, protocol)
        if baseline.reference is None:
            continue
        field = f"{where}baselines.{i}.reference"
        reference = _reference(field, baseline.reference)
        measured_in = protocols()[baseline.protocol] if baseline.protocol else protocol
        _same_sides(field, reference, parts, baseline.metric or floors.metric, measured_in,
                    target, draft)
        if abs(baseline.accept_length - reference.value) > TOLERANCE * reference.value:
            raise impossible(f"{where}baselines.{i}.accept_length",
                             f"{baseline.accept_length:g}, but reference {reference.id!r} is "
                             f"{reference.value:g} ({reference.source})")


def _protocol(parts: EntryParts) -> Protocol | None:
    declared = parts.workload.reproduces
    if declared is None:
        return None
    known = protocols()
    field = f"{parts.workload_where}reproduces"
    protocol = known.get(declared.protocol)
    if protocol is None:
        raise impossible(f"{field}.protocol", f"no protocol {declared.protocol!r}; known: "
                                              f"{', '.join(sorted(known))}")
    data = protocol.dataset(declared.dataset)
    if data is None:
        raise impossible(f"{field}.dataset",
                         f"protocol {protocol.id!r} has no data set {declared.dataset!r}; it "
                         f"has {', '.join(d.name for d in protocol.datasets)}")
    settings = parts.workload.model_dump(mode="json")
    for key, expected in data.fixed.items():
        if key not in settings:
            raise impossible(f"{field}.dataset",
                             f"protocol {protocol.id!r} fixes {key!r}, which a "
                             f"{parts.workload.kind} workload does not have")
        if settings[key] != expected:
            raise impossible(f"{parts.workload_where}{key}",
                             f"{settings[key]!r}, but protocol {protocol.id!r} ({data.name}) "
                             f"fixes {expected!r} ({protocol.source})")
    return protocol


def _other_protocol(field: str, named: str, entry: Protocol | None) -> None:
    """A baseline's declared other protocol: a known one, not the entry's own."""
    known = protocols()
    if named not in known:
        raise impossible(field, f"no protocol {named!r}; known: {', '.join(sorted(known))}")
    if entry is not None and named == entry.id:
        raise impossible(field, f"{named!r} is this entry's own protocol: leave `protocol` "
                                "out of a baseline measured in it")


def _reference(field: str, wanted: str) -> Reference:
    known = references()
    reference = known.get(wanted)
    if reference is None:
        raise impossible(field, f"no reference {wanted!r} in the references table "
                                "(`harness references` lists them)")
    return reference


def _model(ref: ModelRef | None) -> str | None:
    """A model's hub id or path as the suite names it; None when it comes from the
    environment (a run names it) or is not given."""
    return ref.model if ref is not None and isinstance(ref.model, str) else None


def _same_sides(field: str, reference: Reference, parts: EntryParts, definition: str,
                protocol: Protocol | None, target: ModelRef | None,
                draft: ModelRef | None) -> None:
    pair = (_model(target), _model(draft))
    theirs = (reference.target, reference.draft)
    for mine, other, side in zip(pair, theirs, ("target", "draft"), strict=True):
        if mine is not None and other is not None and mine != other:
            raise impossible(field, f"{reference.id!r} is of the pair {reference.pair}; this "
                                    f"suite's {side} is {mine!r}")
    declared = protocol.id if protocol is not None else None
    if reference.protocol != declared:
        mine_text = (f"reproduces {declared!r}" if declared
                     else "reproduces no protocol (its own workload)")
        if ".reference" in field and "baselines." in field:  # a baseline may be of another
            mine_text += ("; a baseline of another protocol says so with protocol = "
                          f"{reference.protocol!r}")
        raise impossible(field, f"{reference.id!r} was measured in protocol "
                                f"{reference.protocol!r}; this entry {mine_text}")
    if reference.definition != definition:
        raise impossible(field, f"{reference.id!r} is in definition {reference.definition!r}; "
                                f"this entry's figure is {definition!r}")


def _same_strictness(field: str, strict: bool, protocol: Protocol, asserted: bool,
                     what: str) -> None:
    """A floor's `>` or `>=` as its protocol's source asserts it (`what`: of which figure)."""
    if strict != asserted:
        raise impossible(field, f"{strict}, but protocol {protocol.id!r} asserts "
                                f"{what}{'>' if asserted else '>='}")


def _floor_by_rule(where: str, floors: Floors, reference: Reference,
                   protocol: Protocol) -> None:
    rule = protocol.floor_rule
    expected = rule.floor(reference.value)
    if abs(floors.accept_length - expected) > TOLERANCE * expected:
        raise impossible(f"{where}floors.accept_length",
                         f"{floors.accept_length:g}, but protocol {protocol.id!r} sets "
                         f"{rule.describe()}: {rule.fraction:g} x {reference.value:g} = "
                         f"{expected:.6g} ({reference.id})")
    _same_strictness(f"{where}floors.strict", floors.strict, protocol, rule.strict, "")
    if reference.accuracy is not None and floors.accuracy is not None:
        if abs(floors.accuracy - reference.accuracy) > TOLERANCE:
            raise impossible(f"{where}floors.accuracy",
                             f"{floors.accuracy:g}, but {reference.id!r} sets "
                             f"{reference.accuracy:g}")
        _same_strictness(f"{where}floors.accuracy_strict", floors.accuracy_strict, protocol,
                         rule.accuracy_strict, "accuracy ")

