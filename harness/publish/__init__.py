"""`harness publish`: the nightly history as a static site (no script, nothing fetched).

`model.py` gathers what the pages show from the checked loader (`harness.results.store`)
and the trend detector (`harness.analysis.trend`); `charts.py` draws SVG with matplotlib;
`site.py` renders the pages with jinja2 (autoescaped) and writes the folder.
"""
