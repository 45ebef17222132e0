"""Engine adapters: everything engine-specific, behind one small interface.

The harness never imports an engine. It launches the command an adapter builds, from
the engine's own Python environment, and talks to the server over HTTP; the adapter
knows the launch line and the flags it owns, the readiness check, the endpoints, how a
response becomes the harness's per-request figures, and how to check that the server
runs what the suite declares. Pipeline modules (drive, measure, runner) hold no
engine-specific string.

- `interface`: what the pipeline asks of an engine (`EngineAdapter`) and what a response
  becomes (`ParsedResponse`); `registry.adapter_for` picks a suite's adapter.
- `sglang`: SGLang, the engine under test (launch line, API, versions).
- `reference_adapter`: the project's CPU reference engine, which serves SGLang's API (so
  it reuses the SGLang adapter's API half) from its own launch line.
- `reference`: that engine itself (`python -m reference_engine`).

Light to import: no third-party package is imported here.
"""
