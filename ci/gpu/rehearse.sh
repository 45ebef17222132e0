#!/usr/bin/env bash
# Rehearse ci/gpu/run_reference_gpu.sh on a host without a GPU: the same script, the same
# pack, the same offline venv and both runs, with two differences that are set here and
# recorded in each run's provenance (env and device):
#   HARNESS_GPU_INVENTORY=1xH100:80  a simulated inventory, so the fit, CUDA_VISIBLE_DEVICES,
#                                    the allocator's lease and provenance.gpus take a GPU
#                                    that is not there;
#   HARNESS_REFERENCE_DEVICE=cpu     the engine computes on the CPU (`--device cpu`), where
#                                    the suite alone would launch it with `--device cuda`.
# So it exercises everything but CUDA itself. It runs without network where `unshare` can
# make a network namespace (else it says so and runs with PIP_NO_INDEX and the hub offline).
#
#   HARNESS_TORCH_PYTHON=/path/to/python ci/gpu/rehearse.sh
#
# HARNESS_TORCH_PYTHON: an interpreter with torch and transformers (default python3). The
# pack must exist (python ci/gpu/pack.py). Outputs: .gpu-out/rehearsal (or $OUT).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
torch_python="${HARNESS_TORCH_PYTHON:-python3}"
"$torch_python" -c 'import torch, transformers' 2>/dev/null || {
    echo "rehearse: $torch_python has no torch and transformers (set HARNESS_TORCH_PYTHON)" >&2
    exit 2
}
[[ -d "${HARNESS_GPU_PACK:-$root/.gpu-pack}/wheels" ]] || {
    echo "rehearse: no pack (run: python ci/gpu/pack.py)" >&2
    exit 2
}
# The pack's harness wheel is what runs: one older than the checkout's code would rehearse
# old code.
wheel="$(ls "${HARNESS_GPU_PACK:-$root/.gpu-pack}"/wheels/spec_harness-*.whl)"
newer="$(find "$root/harness" "$root/pyproject.toml" -type f -newer "$wheel" \
    -not -path '*/__pycache__/*' -print -quit)"
[[ -z "$newer" ]] || {
    echo "rehearse: $newer is newer than the pack's $wheel (run: python ci/gpu/pack.py)" >&2
    exit 2
}
export HARNESS_TORCH_PYTHON="$torch_python"
export HARNESS_GPU_INVENTORY=1xH100:80 HARNESS_REFERENCE_DEVICE=cpu HARNESS_GPU_REHEARSAL=1
export OUT="${OUT:-$root/.gpu-out/rehearsal}"
rm -rf "$OUT"
# A CPU host is slower than the GPU host: the budget is the rehearsal's own.
export HARNESS_GPU_BUDGET_S="${HARNESS_GPU_BUDGET_S:-900}"
started=$SECONDS
if unshare --user --map-root-user --net true 2>/dev/null; then
    echo "rehearse: in a network namespace of its own (no network)"
    rc=0
    unshare --user --map-root-user --net -- bash -c \
        'ip link set lo up 2>/dev/null || true; exec "$0"' \
        "$root/ci/gpu/run_reference_gpu.sh" || rc=$?
else
    echo "rehearse: cannot make a network namespace here; offline by settings only"
    rc=0
    "$root/ci/gpu/run_reference_gpu.sh" || rc=$?
fi
echo "rehearse: exit $rc after $((SECONDS - started)) s (outputs in $OUT)"
exit "$rc"
