"""SGLang 0.5.23's own forced-acceptance code on CPU, from its engine environment: the
reference engine's knob (reference_engine/forced.py) is modelled on it, so its
draws and its commit rule are checked against SGLang's `sample_simulated_acc_len` and
`apply_dflash_simulated_acceptance` (srt/speculative/spec_utils.py, dflash_utils.py):
plain torch on the verify's tensors, nothing in them needs a GPU."""

from __future__ import annotations

import json
import os
import random
import subprocess
from statistics import mean

import pytest

from harness import builds
from reference_engine.forced import ForcedAcceptance
from tests.sglang_dflash_cpu.conftest import STAND_IN

pytestmark = pytest.mark.slow

LENGTHS = (1.0, 2.5, 4.75, 8.0)
BLOCK = 8
DRAWS = 2000

SCRIPT = """
import json, sys
import torch
from sglang.srt.speculative.dflash_utils import apply_dflash_simulated_acceptance
from sglang.srt.speculative.spec_utils import sample_simulated_acc_len
lengths, block, draws = json.loads(sys.argv[1])
torch.manual_seed(0)
counts = {str(x): [sample_simulated_acc_len(x, "match-expected", block) for _ in range(draws)]
          for x in lengths}
cand = torch.arange(2 * block).view(2, block) + 1000
pred = torch.arange(2 * block).view(2, block) + 2000
commits = {}
for c in range(1, block + 1):
    acc = torch.zeros(2, dtype=torch.int32); commit = torch.zeros(2, dtype=torch.int32)
    bonus = torch.zeros(2, dtype=torch.int64); out = torch.zeros(2, block, dtype=torch.int64)
    apply_dflash_simulated_acceptance(
        candidates=cand, target_predict=pred, accept_len=acc, commit_lens=commit, bonus=bonus,
        out_tokens=out, simulate_acc_len=float(c), simulate_acc_method="match-expected",
        simulate_acc_token_mode="real-draft-token")
    commits[c] = {"accept": acc.tolist(), "commit": commit.tolist(), "out": out.tolist()}
print(json.dumps({"counts": counts, "commits": commits}))
"""


@pytest.fixture(scope="module")
def sglangs_own(sglang_cpu: builds.PreparedBuild) -> dict[str, dict[str, object]]:
    env = {**os.environ, "PYTHONPATH": str(STAND_IN), "SGLANG_SIMULATE_ACC_LEN": "-1"}
    done = subprocess.run([sglang_cpu.python, "-c", SCRIPT,
                           json.dumps([list(LENGTHS), BLOCK, DRAWS])],
                          capture_output=True, text=True, env=env, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    found: dict[str, dict[str, object]] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


@pytest.mark.parametrize("length", LENGTHS)
def test_the_reference_draws_what_sglang_draws(sglangs_own: dict[str, dict[str, object]],
                                               length: float) -> None:
    theirs = sglangs_own["counts"][str(length)]
    assert isinstance(theirs, list)
    draw = random.Random(0)
    ours = [ForcedAcceptance(length).committed(BLOCK, draw) for _ in range(DRAWS)]
    assert set(ours) == set(theirs)  # the floor and the ceiling, clamped to the block
    assert mean(ours) == pytest.approx(mean(theirs), abs=0.08)
    assert mean(theirs) == pytest.approx(length, abs=0.08)


def test_sglang_commits_the_drafts_then_the_targets_token(
        sglangs_own: dict[str, dict[str, object]]) -> None:
    """real-draft-token: c tokens a step, the draft's candidates 1..c-1 then the target's
    token at c-1 -- the rule the reference engine's `_Run.force` follows."""
    commits = sglangs_own["commits"]
    assert isinstance(commits, dict)
    for c in range(1, BLOCK + 1):
        found = commits[str(c)]
        assert found["commit"] == [c, c] and found["accept"] == [c - 1, c - 1]
        for row in range(2):
            drafts = [1000 + row * BLOCK + i for i in range(1, c)]
            assert found["out"][row][:c] == [*drafts, 2000 + row * BLOCK + c - 1]
