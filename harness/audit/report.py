"""The audit's result as data, as JSON for CI, and as a rich table for people."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.attention import BEHAVIOURS, Behaviour, LayerAttention, read_fields, resolve_all
from harness.audit.contract import check_contract
from harness.audit.evaluate import (
    accepts_plain_dict,
    evaluate,
    extract_resolver,
    matching_behaviours,
)
from harness.audit.source import SGLangSource

JSON_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class VersionResult:
    """One SGLang version's own resolver applied to the config."""

    source: SGLangSource
    layers: list[LayerAttention]
    behaves_as: list[Behaviour]  # known behaviours it reproduces on the probe drafts
    accepts_plain_dict: bool  # False: it needs a PretrainedConfig (get_text_config)

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.source.label,
            "version": self.source.version,
            "kind": self.source.kind,
            "origin": self.source.origin,
            "behaves_as": list(self.behaves_as),
            "accepts_plain_dict": self.accepts_plain_dict,
            "layers": [layer.to_dict() for layer in self.layers],
        }


@dataclass(frozen=True)
class AuditReport:
    config_origin: str
    is_causal: bool | None
    behaviours: dict[Behaviour, list[LayerAttention]]
    version: VersionResult | None
    checked_against: str  # the table the expectation is checked against
    expected: list[dict[str, Any]] | None = None
    expected_origin: str | None = None
    differences: list[str] = field(default_factory=list)

    @property
    def checked_layers(self) -> list[LayerAttention]:
        return self.columns()[self.checked_against]

    @property
    def verdict(self) -> str:
        if self.expected is None:
            return "nothing_expected"
        return "differs" if self.differences else "as_expected"

    def columns(self) -> dict[str, list[LayerAttention]]:
        """Every table in display order: the three behaviours, then the version asked for."""
        tables: dict[str, list[LayerAttention]] = dict(self.behaviours)
        if self.version is not None:
            tables[self.version.source.label] = self.version.layers
        return tables

    def differing_layers(self) -> list[int]:
        """Layers whose causality is not the same under every table."""
        tables = list(self.columns().values())
        return [
            index
            for index in range(len(tables[0]))
            if len({table[index].causal for table in tables}) > 1
        ]

    def default_layers(self) -> list[int]:
        """Layers of the checked table whose causality comes from a default (the named risk)."""
        return [layer.index for layer in self.checked_layers if not layer.explicit]

    def to_dict(self) -> dict[str, Any]:
        differing = set(self.differing_layers())
        defaults = set(self.default_layers())
        return {
            "schema_version": JSON_SCHEMA_VERSION,
            "config": self.config_origin,
            "is_causal": self.is_causal,
            "behaviours": {
                name: [layer.to_dict() for layer in layers]
                for name, layers in self.behaviours.items()
            },
            "sglang": None if self.version is None else self.version.to_dict(),
            "checked_against": self.checked_against,
            "default_layers": sorted(defaults),
            "differing_layers": sorted(differing),
            "expected": self.expected,
            "expected_origin": self.expected_origin,
            "differences": self.differences,
            "verdict": self.verdict,
        }


def build_report(
    config: Mapping[str, Any],
    config_origin: str,
    source: SGLangSource | None = None,
    expected: list[dict[str, Any]] | None = None,
    expected_origin: str | None = None,
    behaviour: Behaviour = "fixed",
) -> AuditReport:
    """Resolve the config under every behaviour and the version; check the expectation.

    The expectation is checked against the version asked for, or, without one, against
    `behaviour` (the fixed behaviour by default: what every SGLang since 0.5.18 does).
    """
    fields = read_fields(config)  # malformed configs stop here, before any version runs
    behaviours = resolve_all(config)
    version = None
    if source is not None:
        resolver = extract_resolver(source)
        version = VersionResult(
            source=source,
            layers=evaluate(resolver, config),
            behaves_as=matching_behaviours(resolver),
            accepts_plain_dict=accepts_plain_dict(resolver, config),
        )
    checked = version.source.label if version is not None else behaviour
    checked_layers = version.layers if version is not None else behaviours[behaviour]
    differences = [] if expected is None else check_contract(expected, checked_layers)
    return AuditReport(
        config_origin=config_origin,
        is_causal=fields.is_causal,
        behaviours=behaviours,
        version=version,
        checked_against=checked,
        expected=expected,
        expected_origin=expected_origin,
        differences=differences,
    )


def _cell(layer: LayerAttention) -> str:
    word = "causal" if layer.causal else "bidir"
    return word if layer.explicit else f"{word}*"


def _type_word(layer_type: str | None) -> str:
    return "-" if layer_type is None else layer_type.removesuffix("_attention")


def render(report: AuditReport, console: Any) -> None:
    """Print the per-layer table and the findings on a rich Console."""
    from rich import box  # lazily: the command module must import fast
    from rich.table import Table

    tables = report.columns()
    differing = set(report.differing_layers())
    defaults = set(report.default_layers())
    table = Table(
        title=f"DFlash draft attention: {report.config_origin}",
        title_justify="left",
        box=box.SIMPLE_HEAD,
    )
    table.add_column("layer", justify="right")
    table.add_column("type")
    table.add_column("window", justify="right")
    for name in tables:
        if name in BEHAVIOURS:
            table.add_column(name, min_width=len(name))
        else:  # the version asked for: its label on two lines keeps the table narrow
            table.add_column(name.replace(" ", "\n", 1), style="bold")
    table.add_column("from")
    for index, layer in enumerate(report.checked_layers):
        marker = " ≠" if index in differing else ""
        table.add_row(
            f"{index}{marker}",
            _type_word(layer.layer_type),
            "full" if layer.window is None else str(layer.window),
            *(_cell(column[index]) for column in tables.values()),
            "default" if index in defaults else "is_causal",
            style="bold yellow" if index in differing else None,
        )
    console.print(table)
    console.print(
        "bidir = bidirectional; * = causality from a default, not an explicit is_causal; "
        f"from = where {report.checked_against} takes it; ≠ = differs between behaviours",
        markup=False,
    )

    declared = "not declared" if report.is_causal is None else str(report.is_causal).lower()
    console.print(f"is_causal: {declared}")
    if defaults:
        console.print(
            f"[yellow]risk:[/] layers {_ranges(defaults)} take their causality from a default "
            f"under {report.checked_against}; declare is_causal in the draft config to pin it"
        )
    if report.version is not None:
        version = report.version
        matched = ", ".join(version.behaves_as) or "none of the known behaviours"
        console.print(f"{version.source.describe()}: behaves as {matched}")
        if not version.accepts_plain_dict:
            console.print(
                "note: this version's resolver fails on a plain dict config "
                "(it calls PretrainedConfig.get_text_config)"
            )
    if report.expected is None:
        console.print("expectation: none given")
    elif report.differences:
        console.print(
            f"[red]differs[/] from {report.expected_origin} under {report.checked_against}:"
        )
        for difference in report.differences:
            console.print(f"  {difference}", markup=False)
    else:
        console.print(
            f"[green]as expected[/] by {report.expected_origin} under {report.checked_against}"
        )


def _ranges(indices: set[int]) -> str:
    return ", ".join(str(index) for index in sorted(indices))
