"""A local SGLang history made from the 0.5.23 wheel, to bisect with the real server on CPU.

`python/sglang` is the wheel's package as released, `python/pyproject.toml` states the
wheel's own `Requires-Dist` (those without an extra) as `[project] dependencies`, as
SGLang's repository does. The first commit is the release (GOOD); then six commits of
harmless edits, each to another file (comments only), and one of them, the fourth,
reverts PR #34524's sliding-layer default (`revert_pr_34524.diff`, the seed regression):
the last commit is BAD. None touches a line the suite's CPU test patch changes, so the
patch applies at every commit. Author, committer and dates are fixed, so the same wheel
gives the same commit ids.

    python -m tests.sglang_dflash_cpu.history /tmp/sglang-history [--wheel PATH]
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zipfile
from email.parser import Parser
from pathlib import Path

HERE = Path(__file__).resolve().parent
REVERT = HERE / "revert_pr_34524.diff"
VERSION = "0.5.23"
REVERT_AT = 4  # 1-based among the edits after the release

# (file under python/sglang, the comment appended, the commit's subject); the REVERT_AT-th
# commit applies the revert instead.
EDITS = [
    ("srt/server_args.py", "# Server arguments are validated in arg_groups/ before launch.",
     "server_args: note where the arguments are validated"),
    ("srt/managers/scheduler.py",
     "# The scheduler's event loop is chosen in run_scheduler_process.",
     "scheduler: note where the event loop is chosen"),
    ("srt/layers/radix_attention.py", "# RadixAttention forwards to the backend set on the batch.",
     "radix_attention: document the backend dispatch"),
    (None, None, "dflash: sliding-window draft layers default to ENCODER_ONLY again"),
    ("srt/speculative/spec_info.py",
     "# Speculative algorithms are parsed from --speculative-algorithm.",
     "spec_info: note how the algorithm is parsed"),
    ("srt/utils/common.py", "# Platform probes here are cached per process.",
     "utils: note that platform probes are cached"),
]
_IDENTITY = {"GIT_AUTHOR_NAME": "history", "GIT_AUTHOR_EMAIL": "history@example.invalid",
             "GIT_COMMITTER_NAME": "history", "GIT_COMMITTER_EMAIL": "history@example.invalid"}


def _git(repo: Path, *args: str, when: int = 0) -> str:
    date = f"2026-01-01T{10 + when:02d}:00:00+00:00"
    env = {**os.environ, **_IDENTITY, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date,
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


def wheel_for(version: str = VERSION) -> Path:
    """The release's wheel: `$HARNESS_SGLANG_WHEELS` or the harness cache, else downloaded
    there once (the audit's wheel cache)."""
    from harness.audit.wheels import archive_for

    return archive_for(version)


def pyproject(metadata_text: str) -> str:
    """A `python/pyproject.toml` stating the wheel's requirements without an extra."""
    metadata = Parser().parsestr(metadata_text)
    dependencies = [line for line in metadata.get_all("Requires-Dist") or []
                    if "extra ==" not in line]
    lines = ["# Made from the wheel's METADATA by tests/sglang_dflash_cpu/history.py.",
             "[project]", 'name = "sglang"', f'version = "{metadata["Version"]}"',
             f'requires-python = "{metadata.get("Requires-Python", ">=3.10")}"',
             "dependencies = ["]
    lines += [f"    {json.dumps(line)}," for line in dependencies]
    return "\n".join([*lines, "]", ""])


def make_history(path: Path, wheel: Path | None = None) -> tuple[Path, list[str], str]:
    """(repo, [release, edit 1 .. edit 6], the reverting commit's sha)."""
    wheel = wheel or wheel_for()
    if path.exists():
        shutil.rmtree(path)
    package = path / "python"
    package.mkdir(parents=True)
    with zipfile.ZipFile(wheel) as archive:
        metadata = ""
        for name in archive.namelist():
            if name.startswith("sglang/") and not name.endswith("/"):
                target = package / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(archive.read(name))
            elif name.endswith(".dist-info/METADATA") and name.count("/") == 1:
                metadata = archive.read(name).decode()
    (package / "pyproject.toml").write_text(pyproject(metadata))
    _git(path, "init", "-q", "-b", "main")
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", f"sglang {VERSION}, the release (from {wheel.name})")
    shas = [_git(path, "rev-parse", "HEAD")]
    for k, (file, comment, subject) in enumerate(EDITS, start=1):
        if k == REVERT_AT:
            _git(path, "apply", str(REVERT))
        else:
            assert file is not None and comment is not None
            target = package / "sglang" / file
            target.write_text(target.read_text() + f"\n{comment}\n")
        _git(path, "add", "-A")
        _git(path, "commit", "-q", "-m", subject, when=k)
        shas.append(_git(path, "rev-parse", "HEAD"))
    return path, shas, shas[REVERT_AT]


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="a local SGLang history from the wheel")
    parser.add_argument("path", type=Path)
    parser.add_argument("--wheel", type=Path, help="the sglang 0.5.23 wheel (default: cached "
                        "or downloaded)")
    args = parser.parse_args()
    repo, shas, reverting = make_history(args.path.resolve(), args.wheel)
    print(f"{repo}: GOOD {shas[0]} (the release), the default reverted at commit "
          f"{REVERT_AT} {reverting}, BAD {shas[-1]}")
