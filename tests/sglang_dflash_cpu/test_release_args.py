"""Each release's own argument parser on tiny_dflash_sglang_cpu's launch line, patched.

For every release with a DFLASH CPU test patch from 0.5.19 (tests/cpu_patches): the
release's `sglang/` from its cached wheel ($HARNESS_SGLANG_WHEELS), its own test patch
applied, run by the CPU engine environment's interpreter (0.5.23's dependencies) with the
stand-ins first on the path, as the server gets them: `prepare_server_args` (what
`python -m sglang.launch_server` runs first) must accept the harness's launch line and put
each value in the field the harness means. 0.5.18 is not here: the stand-ins' AMX answer
goes through `runtime_context.override_platform`, which 0.5.18 does not have
(tests/audit/test_cpu_patches_fit_their_release.py pins that), so no server of it starts with them.
"""

from __future__ import annotations

import json
import os
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pytest

from harness.audit.wheels import cached_archive, wheel_cache_dir
from harness.builds.gitrepo import git_env
from harness.engines.sglang import launch_command
from harness.suite.model import load_suite
from harness.suite.release_patches import for_release
from tests.sglang_dflash_cpu.conftest import REPO, STAND_IN, SUITE

RELEASES = ("0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23")
PARSE = """
import json, sys
from sglang.srt.server_args import prepare_server_args
args = prepare_server_args(json.loads(sys.argv[1]))
print(json.dumps({k: getattr(args, k) for k in json.loads(sys.argv[2])}))
"""


def _tree(release: str, root: Path) -> Path:
    """The release's sglang/ as python/sglang/..., its own test patch applied."""
    archive = cached_archive(release, wheel_cache_dir())
    if archive is None or not archive.name.endswith(".whl"):
        pytest.skip(f"no sglang {release} wheel in {wheel_cache_dir()} "
                    "(set HARNESS_SGLANG_WHEELS)")
    with zipfile.ZipFile(archive) as wheel:
        wheel.extractall(root / "python", [m for m in wheel.namelist()
                                           if m.startswith("sglang/")])
    patch = REPO / for_release(load_suite(REPO / "suites" / f"{SUITE}.toml").suite.engine
                               .test_patches[0], release)
    subprocess.run(["git", "apply", "--include=python/sglang/*", str(patch)], cwd=root,
                   check=True, capture_output=True,
                   env=git_env({"GIT_CEILING_DIRECTORIES": str(root.parent)}))
    return root / "python"


@pytest.mark.parametrize("release", RELEASES)
def test_the_release_parses_the_suites_launch_line(release: str, sglang_cpu: Any,
                                                   tmp_path: Path) -> None:
    suite = load_suite(REPO / "suites" / f"{SUITE}.toml").suite
    argv = launch_command(suite, "python", "127.0.0.1", 30000)[3:]
    pairs = {argv[i]: argv[i + 1] for i in range(len(argv) - 1)
             if argv[i].startswith("--") and not argv[i + 1].startswith("--")}
    switches = [a for i, a in enumerate(argv) if a.startswith("--") and a not in pairs]
    fields = {flag.removeprefix("--").replace("-", "_"): value
              for flag, value in pairs.items()}
    tree = _tree(release, tmp_path / release)
    env = {**os.environ, "SGLANG_USE_CPU_ENGINE": "1",
           "PYTHONPATH": f"{STAND_IN}:{tree}"}
    done = subprocess.run([sglang_cpu.python, "-c", PARSE, json.dumps(argv),
                           json.dumps([*fields, *(s[2:].replace("-", "_") for s in switches)])],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    parsed = json.loads(done.stdout.strip().splitlines()[-1])
    assert {k: str(parsed[k]) for k in fields} == fields, release
    assert all(parsed[s[2:].replace("-", "_")] is True for s in switches), (release, parsed)
    assert (parsed["speculative_algorithm"], parsed["speculative_draft_attention_backend"]) \
        == ("DFLASH", "intel_amx")
