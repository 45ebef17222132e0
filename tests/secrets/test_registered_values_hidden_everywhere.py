"""One mask (issue 29): every secret value the harness learns is registered and masked by
value in every output stream and every file written, on top of the name rules; printed
record text has its control characters escaped. Each case as the issue found it on 48b3f00."""

from __future__ import annotations

import json
import string
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import secrets
from harness.cli import main
from harness.engines.registry import secret_flags
from harness.secrets import (
    is_secret_flag,
    is_secret_name,
    redact_argv,
    redact_env,
    redact_text,
    register_document,
    register_process,
)
from harness.suite.model import load_suite

SECRET = "PLANTEDsecret4711"
TINY = load_suite("tiny_dflash_cpu")


@pytest.mark.parametrize("name", ["AUTHORIZATION", "Authorization", "API_TOKENS",
                                  "VLLM_API_KEYS", "JWT", "MY_JWT", "BEARER", "HF_TOKEN"])
def test_names_that_hold_credentials(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize("name", ["SORT_KEYS", "NUM_SPECULATIVE_TOKENS", "MAX_NEW_TOKENS",
                                  "AUTHORIZATION_TYPE", "AUTHOR", "KEYBOARD_LAYOUT"])
def test_names_that_do_not(name: str) -> None:
    assert not is_secret_name(name)


@pytest.mark.parametrize("args", [
    ["--api_key", SECRET], [f"--api_key={SECRET}"], [f"--hf_token={SECRET}"],
    ["--hf_token", SECRET], ["--api_k", SECRET], [f"--api-key={SECRET}"],
])
@pytest.mark.parametrize("engine", ["vllm", "sglang", "reference"])
def test_secret_flags_in_every_spelling_the_engine_parser_accepts(args: list[str],
                                                                  engine: str) -> None:
    """vLLM's parser reads `--api_key` / `--hf_token=` as its secret flags (underscores are
    dashes to it); the redaction did not."""
    flags = secret_flags(engine)
    if engine != "vllm" and args[0].startswith("--hf_token") and "--hf-token" not in flags:
        assert is_secret_flag(args[0], flags)  # any engine's secret flag, in full
    shown = redact_argv(["serve", *args, "--port", "1"], flags)
    assert SECRET not in " ".join(shown) and "--port" in shown


@pytest.mark.parametrize(("text", "kept"), [
    (f"https://user:{SECRET}@host/x", "https://user:"),
    (f"https://user:p@ss{SECRET}@host/x", "@host/x"),  # a password holding '@'
    (f"https:/user:{SECRET}@host/x", "https:/user:"),  # a URL joined as a path
    (f"https://host/data?token={SECRET}&page=2", "page=2"),
    (f"https://host/x?sig={SECRET}", "https://host/x?sig="),
    (f"Authorization: Bearer {SECRET}", "Authorization: Bearer "),
    (f"git+https://u:{SECRET}@github.com/o/r@main", "github.com/o/r@main"),
])
def test_patterns_catch_what_was_never_registered(text: str, kept: str) -> None:
    shown = secrets.redact_text(text)
    assert SECRET not in shown and "p@ss" not in shown and kept in shown


def test_values_that_look_secret_are_hidden_whatever_their_name() -> None:
    env = {"X_HEADER": f"Bearer {SECRET}9", "PLAIN": "hello world", "AUTHORIZATION": "abc123",
           "DB_URL": f"postgres://u:{SECRET}@db/x"}
    shown = redact_env(env)
    assert shown["X_HEADER"] == secrets.REDACTED and shown["AUTHORIZATION"] == secrets.REDACTED
    assert shown["PLAIN"] == "hello world" and SECRET not in shown["DB_URL"]


def test_a_registered_value_is_masked_everywhere_later() -> None:
    document = {"target": {"model": f"https://user:{SECRET}@host/x"}}
    register_document(document)
    assert SECRET in secrets.registered()
    # the reference engine joins the model into a path: `https:/user:...`, then a message
    # quotes only the password's tail
    assert SECRET not in redact_text(f"no such folder: {SECRET[3:]}x {SECRET}")
    assert secrets.redact_text(f"model {SECRET}") == f"model {secrets.REDACTED}"
    assert json.dumps(SECRET)[1:-1] in "".join(secrets.registered())


def test_short_or_common_values_are_not_masked_by_value() -> None:
    secrets.register(["true", "1", "", None, "dact", "enabled", "12345678", "<redacted>x"])
    assert secrets.registered() == ()
    assert secrets.redact_text("verdict true <redacted>") == "verdict true <redacted>"


def test_the_process_s_own_secrets_are_registered() -> None:
    register_process({"HF_TOKEN": SECRET, "HOME": "/root", "X": f"Bearer {SECRET}2"},
                     ["run", "s", "--sglang", f"git+https://u:{SECRET}3@h/r"])
    for value in (SECRET, f"Bearer {SECRET}2", f"{SECRET}3"):
        assert value in secrets.registered()
    assert "/root" not in secrets.registered()


# ------------------------------------------------------------ files the harness writes


def test_no_registered_secret_reaches_a_file(tmp_path: Path) -> None:
    from harness.results.layout import INDEX_FILE
    from harness.results.writer import save_run
    from tests.results.records import make_run

    secrets.register([SECRET])
    run_dir = make_run(tmp_path / "results", label=f"night {SECRET}",
                       spec=f"git+https://u:{SECRET}x@h/r@main")
    data = json.loads((run_dir / "run.json").read_text())
    data["paired"] = {
        "against": {"run_id": "ref", "spec": f"git+https://u:pw{SECRET}@github.com/x",
                    "reused": False},
        "status": "pass", "floors_status": "pass",
        "result": {"decision": "not_worse", "n": 40, "a": 2.5, "b": 2.5, "difference": 0.0,
                   "relative_change": 0.0, "tolerated_drop": 0.05, "level": 0.9,
                   "tolerance": "2.0% of A"}}
    data["run_id"] = "second"
    from harness.results.record import RunRecord

    save_run(tmp_path / "results", RunRecord.model_validate(data))
    for file in (tmp_path / "results").rglob("*"):
        if file.is_file():
            text = file.read_text()
            assert SECRET not in text, file
    assert (run_dir.parent / INDEX_FILE).exists()


# ------------------------------------------------------------ every output stream


def _suite(tmp_path: Path, document: dict[str, Any]) -> Path:
    path = tmp_path / "suite.toml"
    path.write_text(tomli_w.dumps(document))
    return path


def _plant(document: dict[str, Any], field: str, secret: str) -> dict[str, Any]:
    document = json.loads(json.dumps(document))
    engine = document.setdefault("engine", {})
    if field == "model_url":
        document["target"] = {"model": f"https://user:{secret}@host/x"}
        document["draft"]["model"] = f"https://user:{secret}@host/d"
    elif field == "model_url_at":
        document["target"] = {"model": f"https://user:p@{secret}@host/x"}
        document["draft"]["model"] = f"https://user:p@{secret}@host/d"
    elif field.startswith("env:"):
        name = field.removeprefix("env:")
        value = f"Bearer {secret}" if name == "X_HEADER" else secret
        engine["env"] = {name: value}
    elif field.startswith("arg:"):
        flag = field.removeprefix("arg:")
        engine["extra_args"] = [f"{flag}{secret}"] if flag.endswith("=") else [flag, secret]
    elif field == "query":
        document["description"] = f"data from https://host/x?token={secret}"
    elif field == "baseline_source":
        document["baselines"] = [{"label": "b", "accept_length": 3.0, "metric": "server_avg",
                                  "source": f"https://u:{secret}@wiki/x"}]
    return document


FIELDS = ["model_url", "model_url_at", "env:HF_TOKEN", "env:AUTHORIZATION", "env:API_TOKENS",
          "env:VLLM_API_KEYS", "env:JWT", "env:X_HEADER", "arg:--api-key", "arg:--api_key",
          "arg:--hf_token=", "arg:--api-k", "query", "baseline_source"]
COMMANDS = [["show"], ["show", "--json"], ["validate"], ["run", "--dry-run"]]


@pytest.mark.parametrize("field", FIELDS)
def test_a_planted_secret_reaches_no_output(tmp_path: Path, field: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """`show`, `show --json`, `validate` and the dry run, with the secret in each field a
    suite can carry one in: exit as before, and not a character of it printed."""
    document = _plant(TINY.document, field, SECRET)
    path = _suite(tmp_path, document)
    for command in COMMANDS:
        code = main([command[0], str(path), *command[1:], "--results", str(tmp_path / "r")]
                    if command[0] == "run" else [command[0], str(path), *command[1:]])
        captured = capsys.readouterr()
        assert SECRET not in captured.out + captured.err, (command, field)
        assert code in (0, 2), (command, captured.err)


def test_against_with_credentials_is_masked(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """`--against git+https://u:pw@...` was printed by the dry run."""
    code = main(["run", "qwen3_8b_dflash", "--dry-run", "--results", str(tmp_path),
                 "--build", "sglang==0.5.23", "--against",
                 f"git+https://u:{SECRET}@github.com/sgl-project/sglang@main"])
    captured = capsys.readouterr()
    assert SECRET not in captured.out + captured.err
    assert code in (0, 2, 4)


@settings(max_examples=25, deadline=timedelta(seconds=20), derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(field=st.sampled_from(FIELDS),
       secret=st.text(string.ascii_letters + string.digits + "-_.~!$*+", min_size=8,
                      max_size=24).map(lambda s: "Zq9" + s))
def test_any_planted_secret_reaches_no_output(tmp_path: Path, field: str, secret: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    document = _plant(TINY.document, field, secret)
    path = _suite(tmp_path, document)
    secrets.forget()
    for command in (["show", str(path)], ["run", str(path), "--dry-run", "--results",
                                          str(tmp_path / "r")]):
        main(command)
        captured = capsys.readouterr()
        assert secret not in captured.out + captured.err, (command, field)


# ------------------------------------------------------------ control characters


@pytest.mark.parametrize("control", ["\x1b]0;pwned\x07", "\x1b[2J", "\x00", "\u202e", "\r",
                                     "\x9b31m", "\x08\x08"])
def test_printed_text_has_its_control_characters_escaped(control: str) -> None:
    shown = secrets.shown(f"label {control} end")
    assert control not in shown and shown.startswith("label ") and shown.endswith(" end")
    assert "\\x" in shown or "\\u" in shown


def test_record_text_reaches_the_terminal_escaped(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Record text with ESC, NUL or U+202E was printed raw by the CLI."""
    from tests.results.records import make_run, paired_block

    root = tmp_path / "results"
    run_dir = make_run(root, spec="evil\x1b]0;title\x07\x00\u202ebuild")
    data = json.loads((run_dir / "run.json").read_text())
    data["paired"] = paired_block(
        data["measurement"]["accept_length"],
        {"run_id": "ref\x1b[2J", "spec": "x\u202ey", "reused": True, "path": "x"},
        tolerance="2%")
    (run_dir / "run.json").write_text(json.dumps(data))
    for args in (["paired", "tiny_dflash_cpu", "--results", str(root)],
                 ["paired", "tiny_dflash_cpu", "--results", str(root), "--markdown"],
                 ["trend", "--results", str(root)]):
        main(args)
        captured = capsys.readouterr()
        for control in ("\x1b", "\x00", "\u202e", "\x07"):
            assert control not in captured.out + captured.err, (args, control)
    main(["paired", "tiny_dflash_cpu", "--results", str(root), "--markdown"])
    assert "\\u202e" in capsys.readouterr().out


def test_the_guarded_stream_keeps_a_terminal_s_styling_only() -> None:
    import io

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal, pipe = Terminal(), io.StringIO()
    for target in (secrets.GuardedStream(terminal), secrets.GuardedStream(pipe)):
        target.write(f"\x1b[1mbold\x1b[0m \x1b]0;title\x07 {SECRET}\n")
        target.flush()
    secrets.register([SECRET])
    assert terminal.getvalue().startswith("\x1b[1mbold\x1b[0m \\x1b]0;title\\x07")
    assert "\x1b" not in pipe.getvalue()
    stream = secrets.GuardedStream(io.StringIO())
    stream.write(SECRET[:5])
    stream.write(SECRET[5:] + "\n")  # split over two writes
    assert SECRET not in stream.stream.getvalue()


def test_loading_a_suite_registers_its_secrets(tmp_path: Path) -> None:
    """What the engine's server logs later (its model path, a flag's value) is masked by
    value from the moment the suite is loaded: the server log's filter gets them too."""
    import io

    from harness.run.launch import _RedactingPump

    document = _plant(_plant(TINY.document, "model_url", SECRET), "arg:--api_key", SECRET + "k")
    loaded = load_suite(_suite(tmp_path, document))
    assert SECRET in secrets.registered() and SECRET + "k" in secrets.registered()
    assert loaded.suite.engine.extra_args  # the server gets the real value
    log = io.BytesIO()  # server.log, as the pump writes it (bytes not UTF-8 kept)
    _RedactingPump(io.BytesIO(f"args {SECRET}k\n\xff raw {SECRET}\n".encode("latin-1")),
                   log).run()
    assert SECRET.encode() not in log.getvalue() and b"\xff raw " in log.getvalue()
    assert SECRET not in redact_text(f"loading https:/user:{SECRET}@host/x failed: {SECRET}")
