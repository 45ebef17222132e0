"""A SIGTERM landing anywhere in a command, not only inside a run's measurement, unwinds
like Ctrl-C: exit 130 with the signal named, no traceback, never the signal's default kill
(which once ended a run whose record was written while its lines were still printing)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from harness.errors import ExitCode

# `harness list`'s work replaced by one that signals its own process midway, in a child
# process: were the handler missing, the default action would kill pytest itself
CHILD = textwrap.dedent("""
    import os, signal, sys
    import harness.commands.listing as listing

    def work(args):
        print("before the signal", flush=True)
        os.kill(os.getpid(), signal.{signal})
        print("after the signal", flush=True)  # never reached: the handler raises
        return 0

    listing.run = work
    from harness import cli
    sys.exit(cli.main(["list"]))
""")


@pytest.mark.parametrize("name", ["SIGTERM", "SIGINT"])
def test_a_signal_in_any_command_exits_130_naming_it(name: str) -> None:
    done = subprocess.run([sys.executable, "-c", CHILD.format(signal=name)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == ExitCode.INTERRUPTED, (done.returncode, done.stderr)
    assert done.stdout.splitlines() == ["before the signal"]
    assert "Traceback" not in done.stderr
    said = "stopped by signal SIGTERM" if name == "SIGTERM" else "interrupted (SIGINT)"
    assert done.stderr.strip() == f"harness list: {said}"
