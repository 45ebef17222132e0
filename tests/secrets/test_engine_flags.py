"""The secret flags come from the engines' table (harness/engine_kinds.py): each engine's row
is its adapter's list; where no engine is known the list is the union over the table, so an
engine added to the table has its flags hidden everywhere, and none can be left out of the
union."""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import get_args

import pytest

from harness import secrets
from harness.builds.spec import EngineKind as BuildEngineKind
from harness.engine_kinds import ENGINES, EngineKind
from harness.engines import registry
from harness.engines.registry import adapter_for

ENGINES_DIR = Path(registry.__file__).resolve().parent
PLANTED = "pl4nted-value-77"


def test_the_union_is_every_registered_adapter_s() -> None:
    union = frozenset().union(*(adapter_for(kind).secret_flags for kind in registry.kinds()))
    assert union and secrets.secret_flags() == union
    for kind in registry.kinds():
        assert secrets.secret_flags(kind) == adapter_for(kind).secret_flags
    assert secrets.secret_flags("no-such-engine") == union


def test_every_adapter_is_registered() -> None:
    """Every module of harness/engines that makes an ADAPTER is one the registry loads."""
    defining = set()
    for path in ENGINES_DIR.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "ADAPTER"
                                                     for t in node.targets)
               for node in tree.body):
            parts = path.relative_to(ENGINES_DIR.parents[1]).with_suffix("").parts
            defining.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    adapters = [adapter_for(kind) for kind in registry.kinds()]  # loads them, then look
    # A module's own namespace, never getattr: lazy modules (transformers) import on
    # attribute access, and what they import may be absent here.
    namespaces = {name: getattr(module, "__dict__", None) or {}
                  for name, module in list(sys.modules.items())}
    loaded = {name for name, namespace in namespaces.items()
              if any(namespace.get("ADAPTER") is adapter for adapter in adapters)}
    assert defining and defining <= loaded
    assert set(registry.kinds()) == set(get_args(BuildEngineKind))


def test_an_engine_added_to_the_table_is_hidden_everywhere(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(ENGINES, "fake", EngineKind("no.such.module",
                                                    frozenset({"--fake-secret"})))
    assert "--fake-secret" in secrets.secret_flags()
    assert "fake" in registry.kinds()
    for argv in (["x", "--fake-secret", PLANTED], [f"--fake-secret={PLANTED}"]):
        assert PLANTED not in " ".join(secrets.redact_argv(argv))
    document = {"engine": {"kind": "fake", "extra_args": ["--fake-secret", PLANTED]}}
    assert PLANTED not in str(secrets.redact_document(document))
    assert PLANTED in secrets.registered()  # and masked by value from then on
    assert secrets.redact_text(f"later: {PLANTED}") == f"later: {secrets.REDACTED}"


def test_an_engine_s_own_flags_are_used_for_its_command_line() -> None:
    """--watermark-k abbreviates SGLang's --watermark-key; vLLM has no such flag (and
    --hf-tok abbreviates only vLLM's --hf-token)."""
    assert PLANTED not in secrets.redact_argv(["--watermark-k", PLANTED],
                                              secrets.secret_flags("sglang"))
    assert PLANTED not in secrets.redact_argv(["--hf-tok", PLANTED],
                                              secrets.secret_flags("vllm"))
    secrets.forget()  # the value above is registered now: masked whatever the flag
    assert secrets.redact_argv(["--hf-tok", PLANTED], secrets.secret_flags("sglang")) == \
        ["--hf-tok", PLANTED]


def test_the_harness_s_own_flags_are_not_read_as_secret() -> None:
    """The harness's own command line is read by the name rule (no engine's parser, and no
    engine loaded at start-up): none of its flags is named like a credential, and a
    credential flag given to it by mistake is hidden in argparse's complaint."""
    from harness.cli import build_parser

    parser, _ = build_parser()
    subparsers = [action for action in parser._actions if action.choices
                  and isinstance(action.choices, dict)]
    flags = {option for sub in subparsers for command in sub.choices.values()
             for action in command._actions for option in action.option_strings}
    assert "--results" in flags
    assert [flag for flag in flags if secrets.is_secret_flag(flag, own=True)] == []
    secrets.register_process({}, ["run", "s", "--api-key", PLANTED])
    assert PLANTED in secrets.registered()


def test_the_oracle_test_reads_the_adapter() -> None:
    """tests/sglang_oracle checks SGLang's own parser against the adapter's list, the list
    the union is made of (nox -s sglang_args)."""
    oracle = (Path(__file__).resolve().parents[1] / "sglang_oracle" / "test_secret_flags.py")
    text = oracle.read_text()
    assert 'adapter_for("sglang").secret_flags' in text and "harness.secrets" in text


def test_a_process_that_never_loads_an_engine_hides_the_same_flags() -> None:
    """A process that loads a suite without the engines (a notebook) reads the same table
    as one that loaded every adapter: nothing is handed over by an import, so nothing can
    be missing."""
    import subprocess

    probe = ("import sys\n"
             "from harness.suite.model import load_suite\n"
             "from harness.secrets import secret_flags\n"
             "load_suite('tiny_dflash_cpu')\n"
             "print(sorted(secret_flags()), sorted(secret_flags('vllm')),\n"
             "      any(name.startswith('harness.engines') for name in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True, cwd=ENGINES_DIR.parents[1])
    loading = ("from harness.engines.registry import adapter_for, kinds\n"
               "[adapter_for(kind) for kind in kinds()]\n" + probe)
    loaded = subprocess.run([sys.executable, "-c", loading], capture_output=True,
                            text=True, check=True, cwd=ENGINES_DIR.parents[1])
    assert done.stdout.split("] ")[:2] == loaded.stdout.split("] ")[:2]
    assert done.stdout.rstrip().endswith("False") and loaded.stdout.rstrip().endswith("True")
    assert "--api-key" in done.stdout and "--hf-token" in done.stdout
