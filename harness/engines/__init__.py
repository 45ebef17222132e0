"""Engine adapters: each turns a suite into a server command line and environment.

The harness never imports an engine; it launches the command an adapter
builds, from the engine's own Python environment, and speaks SGLang's HTTP API.
"""
