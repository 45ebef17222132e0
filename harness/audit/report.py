"""The behaviours-only audit (no SGLang version given): the draft under the three known
behaviours of the harness's own model (harness/suite/attention.py), as data, JSON and a table.

With `--sglang`, the versions' own code decides instead (table.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from harness.audit.contract import LayerExpectation, check_contract
from harness.suite.attention import Behaviour, LayerAttention, read_fields, resolve_all

if TYPE_CHECKING:
    from rich.console import Console

JSON_SCHEMA_VERSION = 2  # 2: a layer's `window` is `window_tokens` + `sglang_window_left`


@dataclass(frozen=True)
class AuditReport:
    config_origin: str
    is_causal: bool | None
    behaviours: dict[Behaviour, list[LayerAttention]]
    checked_against: str  # the table the expectation is checked against
    expected: list[LayerExpectation] | None = None
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
        """Every table in display order: the three behaviours."""
        return {name: layers for name, layers in self.behaviours.items()}

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

    def to_dict(self) -> dict[str, object]:
        differing = set(self.differing_layers())
        defaults = set(self.default_layers())
        return {
            "schema_version": JSON_SCHEMA_VERSION,
            "config": self.config_origin,
            "is_causal": self.is_causal,
            "behaviours": {
                name: [layer.audit_dict() for layer in layers]
                for name, layers in self.behaviours.items()
            },
            "checked_against": self.checked_against,
            "default_layers": sorted(defaults),
            "differing_layers": sorted(differing),
            "expected": self.expected,
            "expected_origin": self.expected_origin,
            "differences": self.differences,
            "verdict": self.verdict,
        }


def build_report(
    config: Mapping[str, object],
    config_origin: str,
    expected: list[LayerExpectation] | None = None,
    expected_origin: str | None = None,
    behaviour: Behaviour = "fixed",
) -> AuditReport:
    """Resolve the config under every behaviour; check the expectation against `behaviour`."""
    fields = read_fields(config)  # the harness's own model: its own validation applies
    behaviours = resolve_all(config)
    checked_layers = behaviours[behaviour]
    differences = [] if expected is None else check_contract(expected, checked_layers)
    return AuditReport(
        config_origin=config_origin,
        is_causal=fields.is_causal,
        behaviours=behaviours,
        checked_against=behaviour,
        expected=expected,
        expected_origin=expected_origin,
        differences=differences,
    )


def _cell(layer: LayerAttention) -> str:
    word = "causal" if layer.causal else "bidir"
    return word if layer.explicit else f"{word}*"


def _type_word(layer_type: str | None) -> str:
    return "-" if layer_type is None else layer_type.removesuffix("_attention")


def render(report: AuditReport, console: Console) -> None:
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
        table.add_column(name, min_width=len(name))
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
