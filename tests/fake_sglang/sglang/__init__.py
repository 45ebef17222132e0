"""Test double of the `sglang` package: only `python -m sglang.launch_server` (see there)."""
