#!/usr/bin/env bash
# The PR gate's plan (.github/workflows/pr-gate.yml): head and the merge base of head with
# the base branch, resolved to commits, as build specs; the job matrix of the suites.
# Inputs (environment): REPO, HEAD_REF, BASE_REPO, BASE_REF, SUITES; GITHUB_OUTPUT.
# Outputs: head_spec, base_spec, matrix. Needs git and `harness` on PATH.
set -euo pipefail
work=$(mktemp -d)
git init -q "$work/sglang"
cd "$work/sglang"
git fetch -q --filter=blob:none "$BASE_REPO" "$BASE_REF"
base_tip=$(git rev-parse FETCH_HEAD)
git fetch -q --filter=blob:none "$REPO" "$HEAD_REF"
head_sha=$(git rev-parse FETCH_HEAD)
merge_base=$(git merge-base "$head_sha" "$base_tip")
cd - > /dev/null
echo "head $HEAD_REF = $head_sha; merge base with $BASE_REF = $merge_base"
if [ "$head_sha" = "$merge_base" ]; then echo "::warning::head is the merge base: nothing to gate"; fi
head_spec="git+$REPO@$head_sha#subdirectory=python"
base_spec="git+$BASE_REPO@$merge_base#subdirectory=python"
matrix=$(harness matrix "$SUITES" --build "head=$head_spec")
echo "$matrix" | python -m json.tool
{
  echo "head_spec=$head_spec"
  echo "base_spec=$base_spec"
  echo "matrix=$matrix"
} >> "$GITHUB_OUTPUT"
