"""The forced-acceptance plot (`harness forced`, harness.analysis.forced_plot) says what it
draws: each axis names its figure and the accept length's definition, the caption under
the panels gives the record's definition of every figure drawn, the real run and the
break-even are in the legend, and with a reference ladder (`--against`) the title names
the share at fault."""

from __future__ import annotations

from harness.analysis.forced_plot import draw_forced
from tests.results.test_forced_record_reader_fuzz import _record

DEFINITIONS = {"achieved": "tokens per verify step, over all requests",
               "speedup_tpot": "target alone's mean TPOT / speculation's",
               "speedup_throughput": "speculation's output tokens/s / the target alone's",
               "break_even": "where the speedup crosses 1.0, interpolated"}


def test_axes_caption_and_legend_name_the_definitions() -> None:
    record = _record().model_copy(update={"definitions": DEFINITIONS})
    figure = draw_forced(record, record.model_copy(update={"split": None}))
    tpot, throughput = figure.axes
    assert tpot.get_xlabel() == "achieved accept length (server_avg)"
    assert tpot.get_ylabel().startswith("speedup_tpot")
    assert throughput.get_ylabel().startswith("speedup_throughput")
    caption = figure.get_supxlabel()
    for name, definition in DEFINITIONS.items():
        assert f"{name}: {definition}" in caption
    labels = [text.get_text() for text in tpot.get_legend().get_texts()]
    assert "real run (3.2)" in labels and "break-even 4.1" in labels
    assert "reference build: real run (3.2)" in labels
    assert "FAIL, draft at fault" in figure.get_suptitle()
