"""The reference engine's forced acceptance on SGLang's semantics
(reference_engine/forced.py): the environment it reads, the committed counts
"match-expected" draws (the floor or the ceiling, with the mean of the forced value, in
[1, block size]), and the decoder under it: every verify step commits the forced count;
forced 1 commits only the target's own token, so greedy output equals the unforced
(lossless) output; a forced full block commits the draft's own tokens."""

from __future__ import annotations

import random
from pathlib import Path
from statistics import mean

import pytest

from reference_engine.forced import (
    LENGTH_ENV,
    METHOD_ENV,
    ForcedAcceptance,
    from_environment,
)

BLOCK = 8


@pytest.mark.parametrize("length", [1.0, 1.3, 2.5, 4.75, 7.9, 8.0])
def test_match_expected_keeps_the_mean_between_floor_and_ceiling(length: float) -> None:
    draw = random.Random(7)
    counts = [ForcedAcceptance(length).committed(BLOCK, draw) for _ in range(4000)]
    assert set(counts) <= {int(length), min(int(length) + 1, BLOCK)}
    assert mean(counts) == pytest.approx(length, abs=0.05)


def test_multinomial_stays_in_the_block() -> None:
    draw = random.Random(3)
    counts = [ForcedAcceptance(7.5, "multinomial").committed(BLOCK, draw) for _ in range(2000)]
    assert min(counts) >= 1 and max(counts) == BLOCK


@pytest.mark.parametrize(("environ", "expected"), [
    ({}, None), ({LENGTH_ENV: ""}, None), ({LENGTH_ENV: "-1"}, None),  # SGLang's "off"
    ({LENGTH_ENV: "0"}, None),  # SGLang applies it only above 0
    ({LENGTH_ENV: "2.5"}, ForcedAcceptance(2.5)),
    ({LENGTH_ENV: "3", METHOD_ENV: "multinomial"}, ForcedAcceptance(3.0, "multinomial")),
])
def test_the_environment_it_reads(environ: dict[str, str],
                                  expected: ForcedAcceptance | None) -> None:
    assert from_environment(environ) == expected


@pytest.mark.parametrize(("environ", "named"), [
    ({LENGTH_ENV: "fast"}, LENGTH_ENV), ({LENGTH_ENV: "nan"}, LENGTH_ENV),
    ({LENGTH_ENV: "2", METHOD_ENV: "uniform"}, METHOD_ENV),
])
def test_a_value_it_cannot_use_is_named(environ: dict[str, str], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        from_environment(environ)


@pytest.mark.slow
def test_the_decoder_commits_the_forced_count(checkpoints: tuple[Path, Path]) -> None:
    from reference_engine.loading import Options, load_decoder

    target, draft = checkpoints
    decoder, _ = load_decoder(Options(target=str(target), draft=str(draft), block_size=BLOCK))
    prompt = "Question: Tom has 3 apples and buys 5 more. How many apples?\nAnswer:"
    real = decoder.generate(prompt, max_new_tokens=16)
    decoder.forced = ForcedAcceptance(1.0)
    one = decoder.generate(prompt, max_new_tokens=16)
    decoder.forced = ForcedAcceptance(float(BLOCK))
    full = decoder.generate(prompt, max_new_tokens=16)
    decoder.forced = ForcedAcceptance(2.5)
    half = decoder.generate(prompt, max_new_tokens=16)
    again = decoder.generate(prompt, max_new_tokens=16)
    decoder.forced = None

    assert set(real.accepted_drafts) != {0}  # the real draft is accepted at times
    assert one.accepted_drafts == [0] * one.verify_steps  # one token a step: the target's
    assert one.output_ids == real.output_ids  # greedy: forced 1 is lossless
    assert full.accepted_drafts == [BLOCK - 1] * full.verify_steps
    assert full.output_ids != real.output_ids  # the draft's own tokens, committed
    assert set(half.accepted_drafts) == {1, 2}  # 2 or 3 tokens a step
    assert half.accepted_drafts == again.accepted_drafts  # drawn from the request's key
