#!/usr/bin/env bash
# Run the reference engine's GPU suite (suites/tiny_dflash_gpu.toml: gpus = 1, the engine
# on CUDA) twice on a GPU host that has torch and transformers but no package index:
#   1. `harness run` (preflight: the host's GPUs from nvidia-smi, the fit, the GPU and
#      CUDA_VISIBLE_DEVICES in the record, provenance.device = cuda);
#   2. the pytest plugin (`pytest --suites`), whose item leases the GPU from the
#      file-locked allocator before the same run.
# Greedy decoding on one GPU: the two accept lengths are expected to be equal.
#
# Everything comes from this checkout and its pack (ci/gpu/pack.py, made beforehand where
# there is network): an offline venv over the host's interpreter (torch, transformers and
# the rest from the host), the harness and the missing packages installed from the pack's
# wheels with `pip install --no-index`. Outputs go to $OUT (the device tool's folder) if
# set, else .gpu-out/. docs/reference-engine.md, "On a GPU host", says how to call it.
#
# Settings (environment): HARNESS_TORCH_PYTHON (default python3: the interpreter holding
# torch), HARNESS_GPU_PACK (default .gpu-pack), HARNESS_GPU_BUDGET_S (default 330: both
# runs, venv included, so that the script and a rerun fit 15 minutes of device time),
# HARNESS_GPU_REHEARSAL=1 (set by ci/gpu/rehearse.sh only: allows wheels of the pack that
# this interpreter cannot install, taken from the torch interpreter instead).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
pack="${HARNESS_GPU_PACK:-$root/.gpu-pack}"
torch_python="${HARNESS_TORCH_PYTHON:-python3}"
budget_s="${HARNESS_GPU_BUDGET_S:-330}"
out="${OUT:-$root/.gpu-out}"
suite="$root/suites/tiny_dflash_gpu.toml"
started=$SECONDS

# No other copy of the harness may leak in: not through PYTHONPATH, not from the checkout
# (every Python below runs with the work folder as its current directory).
unset PYTHONPATH PYTHONHOME PYTHONSTARTUP
# Nothing is fetched: no index, no hub.
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
    HF_DATASETS_OFFLINE=1

say() { printf '[gpu-script %4ds] %s\n' "$((SECONDS - started))" "$*"; }
fail() { say "FAILED: $*"; exit 1; }
left() { echo $((budget_s - (SECONDS - started))); }

[[ -d "$pack/wheels" && -f "$pack/data/gsm8k/test.jsonl" ]] ||
    fail "no pack at $pack (run python ci/gpu/pack.py where there is network, carry .gpu-pack)"
[[ -f "$suite" ]] || fail "no suite $suite"
mkdir -p "$out"
work="$(mktemp -d "${TMPDIR:-/tmp}/gpu-script.XXXXXX")"
cd "$work"
say "work folder $work; outputs in $out; budget ${budget_s} s"

# -- the offline venv ---------------------------------------------------------------------
# --system-site-packages reaches the *base* interpreter's packages; the host's python3 is
# itself a venv (/opt/torch/.venv), so its own site-packages are added by a .pth file (a
# plain path: its .pth files, such as an editable install, are not run). Without pip of
# its own (no ensurepip needed, which a distribution's base Python may lack): the torch
# interpreter's pip, found through that path, installs into the venv it runs in.
"$torch_python" -m venv --without-pip --system-site-packages "$work/venv"
py="$work/venv/bin/python"
site="$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
"$torch_python" -c 'import sysconfig
paths = sysconfig.get_paths()
print("\n".join(dict.fromkeys([paths["purelib"], paths["platlib"]])))' > "$site/_torch_host.pth"
say "venv $work/venv over $torch_python ($(tr '\n' ' ' < "$site/_torch_host.pth"))"

# The pack's wheels this interpreter can install (all of them on the GPU host).
mapfile -t wheels < <("$py" - "$pack/wheels" <<'PY'
import sys
from pathlib import Path
try:
    from packaging.tags import sys_tags
    from packaging.utils import parse_wheel_filename
except ImportError:  # pip's own copy
    from pip._vendor.packaging.tags import sys_tags
    from pip._vendor.packaging.utils import parse_wheel_filename
here = set(sys_tags())
for wheel in sorted(Path(sys.argv[1]).glob("*.whl")):
    fits = bool(set(parse_wheel_filename(wheel.name)[3]) & here)
    print(("" if fits else "SKIP ") + str(wheel))
PY
)
install=()
for line in "${wheels[@]}"; do
    if [[ "$line" == SKIP* ]]; then
        [[ "${HARNESS_GPU_REHEARSAL:-}" == 1 ]] ||
            fail "wheel ${line#SKIP } does not install on $("$py" -V) (pack for the host's Python)"
        say "rehearsal: not installing ${line#SKIP } (not for this Python); the torch interpreter's copy serves"
    else
        install+=("$line")
    fi
done
"$py" -m pip install --quiet --no-index --no-deps --ignore-installed --no-compile \
    "${install[@]}"
say "installed from the pack: $(printf '%s ' "${install[@]##*/}")"

harness_file="$("$py" -c 'import harness; print(harness.__file__)')"
[[ "$harness_file" == "$work/venv/"* ]] || fail "harness imported from $harness_file, not the venv"
say "harness from $harness_file"
"$py" - <<'PY' | tee "$out/environment.txt"
import importlib.metadata as md
import torch
import dflash.model  # noqa: F401  (the engine's decoding pieces import)
import harness.cli  # noqa: F401
for name in ("spec-harness", "torch", "transformers", "dflash", "pydantic", "httpx", "numpy"):
    print(f"{name} {md.version(name)}")
print(f"torch.version.cuda {torch.version.cuda}; cuda available {torch.cuda.is_available()}")
PY

export HARNESS_DATA_DIR="$pack/data" HARNESS_CACHE="$work/cache" HARNESS_RESULTS="$work/results"
export HARNESS_GPU_LOCK_DIR="$work/locks"
harness="$work/venv/bin/harness"

# -- run 1: harness run -------------------------------------------------------------------
say "run 1: harness run $suite ($(left) s left)"
rc1=0
timeout --kill-after=20 "$(left)" "$harness" run "$suite" --results "$work/results/run1" \
    --label gpu-script-1 --no-progress 2>&1 | tee "$out/run1.log" || rc1=$?
say "run 1 ended: exit $rc1"
(( $(left) > 30 )) || fail "no time left for run 2"

# -- run 2: through the pytest plugin and the GPU allocator ---------------------------------
say "run 2: pytest --suites (the allocator's lease) ($(left) s left)"
rc2=0
# An empty folder, and every path glued to its option: pytest finds no configuration (a
# bare path argument would lead it to the checkout's pyproject.toml) and collects the suite
# alone.
mkdir -p "$work/pytest" && cd "$work/pytest"
timeout --kill-after=20 "$(left)" "$py" -m pytest -p no:cacheprovider -q -rA \
    --rootdir="$work/pytest" --suites="$suite" --results-dir="$work/results/run2" \
    --label=gpu-script-2 --gpu-wait=60 --junitxml="$work/junit.xml" 2>&1 |
    tee "$out/run2.log" || rc2=$?
cd "$work"
say "run 2 ended: exit $rc2"

# -- what the two runs recorded -------------------------------------------------------------
check=0
"$py" - "$work" "$out/summary.json" <<'PY' || check=$?
import json
import os
import sys
from pathlib import Path

work, target = Path(sys.argv[1]), Path(sys.argv[2])
expected = os.environ.get("HARNESS_REFERENCE_DEVICE") or "cuda"
runs, problems = {}, []
for name in ("run1", "run2"):
    records = sorted((work / "results" / name).rglob("run.json"))
    if len(records) != 1:
        problems.append(f"{name}: {len(records)} run records")
        continue
    record = json.loads(records[0].read_text())
    provenance, launch = record.get("provenance") or {}, record.get("launch") or {}
    measurement = record.get("measurement") or {}
    runs[name] = {
        "record": str(records[0]), "verdict": (record.get("verdict") or {}).get("status"),
        "reasons": (record.get("verdict") or {}).get("reasons"),
        "accept_length": measurement.get("accept_length"),
        "metric": measurement.get("metric"),
        "device": provenance.get("device"), "gpus": provenance.get("gpus"),
        "cuda": provenance.get("cuda"), "torch": provenance.get("torch"),
        "driver": provenance.get("driver"),
        "cuda_visible_devices": (provenance.get("env") or {}).get("CUDA_VISIBLE_DEVICES"),
        "launch": launch.get("command"),
    }
    run = runs[name]
    if run["verdict"] != "pass":
        problems.append(f"{name}: verdict {run['verdict']}: {run['reasons']}")
    if run["device"] != expected:
        problems.append(f"{name}: provenance.device {run['device']!r}, expected {expected!r}")
    if not run["gpus"]:
        problems.append(f"{name}: no GPU in provenance.gpus")
    if "--device" not in (run["launch"] or []) and expected != "cpu":
        problems.append(f"{name}: the launch line has no --device")
leases = work / "locks" / "gpu-leases.log.jsonl"
events = [json.loads(line) for line in leases.read_text().splitlines()] if leases.exists() else []
if not any(event.get("event") == "acquired" and event.get("devices") for event in events):
    problems.append("run 2: the allocator's log shows no GPU lease")
if len(runs) == 2 and runs["run1"]["accept_length"] != runs["run2"]["accept_length"]:
    problems.append(f"accept lengths differ: {runs['run1']['accept_length']} vs "
                    f"{runs['run2']['accept_length']} (greedy on one device: expected equal)")
summary = {"expected_device": expected, "runs": runs, "leases": events, "problems": problems}
target.write_text(json.dumps(summary, indent=1))
for name, run in runs.items():
    print(f"{name}: {run['verdict']} accept_length {run['accept_length']} ({run['metric']}) "
          f"device {run['device']} gpus {[g.get('name') for g in run['gpus'] or []]} "
          f"CUDA_VISIBLE_DEVICES={run['cuda_visible_devices']}")
print("\n".join(f"PROBLEM {p}" for p in problems) or "all checks passed")
sys.exit(1 if problems else 0)
PY
cp "$work/junit.xml" "$out/" 2>/dev/null || true
tar -czf "$out/results.tar.gz" -C "$work" results locks 2>/dev/null || true
say "done in $((SECONDS - started)) s: run 1 exit $rc1, run 2 exit $rc2, checks exit $check"
(( rc1 == 0 && rc2 == 0 && check == 0 ))
