#!/usr/bin/env bash
# The PR gate's audit (.github/workflows/pr-gate.yml): each gated suite's draft config under
# the head's own SGLang code against the suite's expected_layers (CPU, no weights). Exit 1
# when a draft's attention differs from the contract, 5 when the head's code rejects it.
# Inputs (environment): MATRIX (the plan's job matrix), HEAD_SPEC. Needs git and `harness`.
set -euo pipefail
work=$(mktemp -d)
repo=${HEAD_SPEC#git+}; repo=${repo%%#*}; commit=${repo##*@}; repo=${repo%@*}
git init -q "$work/sglang"
git -C "$work/sglang" fetch -q --depth 1 "$repo" "$commit"
git -C "$work/sglang" checkout -q FETCH_HEAD
for file in $(echo "$MATRIX" | python -c 'import json,sys; print(" ".join(sorted({e["file"] for e in json.load(sys.stdin)["include"]})))'); do
  draft=$(harness show "$file" --json | python -c 'import json,sys; print(json.load(sys.stdin)["suite"]["draft"]["model"])')
  echo "audit $file: draft $draft at $commit"
  harness audit "$draft" --sglang-source "$work/sglang/python" --expect "$file"
done
