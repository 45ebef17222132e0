"""How two sides' questions are matched (`pairing`): on the questions both asked, when both
asked them the same way (the workload's protocol fields, the prompt tokens); otherwise
the sides are compared as independent samples, with warnings saying why."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from harness.analysis.sides import PROTOCOL_FIELDS, Side


@dataclass(frozen=True)
class Pairing:
    """How two sides' questions are matched: `shared` questions asked on both sides are
    paired when both sides asked them the same way; `warnings` say loudly why not."""

    paired: bool
    shared: tuple[Hashable, ...]
    n_a: int
    n_b: int
    warnings: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.paired:
            whole = self.n_a == self.n_b == len(self.shared)
            return (f"paired on {len(self.shared)} shared questions"
                    + ("" if whole else f" (A asked {self.n_a}, B {self.n_b})"))
        return (f"not paired: {len(self.shared)} shared questions (A asked {self.n_a}, "
                f"B {self.n_b})")


def _differences(a: Side, b: Side) -> list[str]:
    """Fields on which the two sides' runs say different things (each side's runs must
    agree among themselves too)."""
    out = []
    for name in (*PROTOCOL_FIELDS, "shots"):
        values_a = {repr(p.get(name)) for p in a.protocols if p.get(name) is not None}
        values_b = {repr(p.get(name)) for p in b.protocols if p.get(name) is not None}
        if len(values_a) > 1 or len(values_b) > 1 or (values_a and values_b
                                                       and values_a != values_b):
            shown_a = ", ".join(sorted(values_a)) or "-"
            shown_b = ", ".join(sorted(values_b)) or "-"
            out.append(f"{name} differs (A {shown_a}; B {shown_b})")
    return out


def pairing(a: Side, b: Side) -> Pairing:
    """Pair on the questions both sides asked, when both asked them the same way: the
    same data rows (`data_sha256`), kind, protocol, template, shots and sampling, and, where
    the server returned them, the same prompt token ids question by question. Runs on
    different data are never paired row by row (question i is another question there)."""
    shared = tuple(sorted(set(a.questions) & set(b.questions), key=str))
    warnings = _differences(a, b)
    prompts = [q for q in shared if q in a.prompt_hashes and q in b.prompt_hashes
               and a.prompt_hashes[q] != b.prompt_hashes[q]]
    if prompts:
        warnings.append(f"{len(prompts)} of the {len(shared)} shared questions were sent as "
                        "different prompt tokens")
    if warnings:
        warnings = [*warnings, "the sides are compared as independent samples, not paired: "
                    "check that they measure the same workload"]
    paired = not warnings and len(shared) >= 2
    return Pairing(paired, shared, len(a.questions), len(b.questions), tuple(warnings))
