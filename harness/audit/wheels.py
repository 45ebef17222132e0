"""SGLang release archives: the cache, bounded downloads, and the list of released versions.

Wheels live in `$HARNESS_SGLANG_WHEELS`, else `<harness cache>/sglang-wheels`; a version
already there needs no network. `pip download` runs with a time limit and its failure is
one clear message. A range `0.5.17..0.5.23` is expanded against the released versions,
asked of the index once (`pip index versions sglang`) and cached for a day; offline, the
cached list or the cached wheels stand in, and the message says so.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from filelock import FileLock

from harness.errors import BadInput
from harness.files import cache_root

ARCHIVE_SUFFIXES = (".whl", ".tar.gz", ".zip")
DOWNLOAD_TIMEOUT_S = float(os.environ.get("HARNESS_SGLANG_DOWNLOAD_TIMEOUT", "300"))
INDEX_TIMEOUT_S = 60.0
VERSIONS_MAX_AGE_S = 24 * 3600
_PIP_SAVED = re.compile(r"(?:Saved|File was already downloaded)\s+(?P<path>\S+)")
_AVAILABLE = re.compile(r"Available versions:\s*(?P<versions>.+)")
_RELEASE = re.compile(r"^\d+(\.\d+)*(\.post\d+)?$")


class SGLangSourceError(BadInput):
    """A version's files could not be found, fetched or read; the message names which."""


def wheel_cache_dir() -> Path:
    """Where downloaded archives are kept: $HARNESS_SGLANG_WHEELS, else the harness cache."""
    if explicit := os.environ.get("HARNESS_SGLANG_WHEELS"):
        return Path(explicit)
    return cache_root() / "sglang-wheels"


def archive_version(name: str) -> str | None:
    # wheel: sglang-0.5.23-cp311-...whl; sdist: sglang-0.5.23.tar.gz
    match = re.match(r"^sglang-(?P<version>[0-9][^-]*?)(?:-|\.tar\.gz$|\.zip$)", name)
    return match.group("version") if match else None


def cached_archive(version: str, cache: Path) -> Path | None:
    """A wheel (preferred) or sdist of exactly this version already in the cache."""
    if not cache.is_dir():
        return None
    found = [
        entry
        for entry in sorted(cache.iterdir())
        if entry.name.endswith(ARCHIVE_SUFFIXES) and archive_version(entry.name) == version
    ]
    wheels = [entry for entry in found if entry.name.endswith(".whl")]
    chosen = wheels or found
    return chosen[0] if chosen else None


def _pip(args: list[str], timeout_s: float, what: str) -> str:
    command = [sys.executable, "-m", "pip", *args, "--disable-pip-version-check"]
    try:
        result = subprocess.run(command, capture_output=True, text=True,
                                timeout=timeout_s, check=False)  # fmt: skip
    except subprocess.TimeoutExpired:
        raise SGLangSourceError(
            f"{what}: the package index gave no answer within {timeout_s:.0f} s (is it "
            "reachable? put the wheel in $HARNESS_SGLANG_WHEELS to work offline)"
        ) from None
    if result.returncode != 0:
        lines = (result.stderr or result.stdout).strip().splitlines()
        tail = [line for line in lines if not line.startswith("WARNING: Location")][-3:]
        raise SGLangSourceError(f"{what} (pip exited {result.returncode}): " + " | ".join(tail))
    return result.stdout


def download_archive(requirement: str, dest: Path) -> Path:
    """`pip download --no-deps --only-binary=:all:` one sglang requirement into dest."""
    dest.mkdir(parents=True, exist_ok=True)
    print(f"downloading {requirement} into {dest} (once: it is cached there)", file=sys.stderr)
    out = _pip(["download", "--no-deps", "--only-binary=:all:", "--dest", str(dest), requirement],
               DOWNLOAD_TIMEOUT_S, f"cannot download {requirement}")  # fmt: skip
    for match in _PIP_SAVED.finditer(out):
        saved = Path(match.group("path"))
        saved = saved if saved.is_absolute() else dest / saved.name
        if saved.name.startswith("sglang-") and saved.exists():
            return saved
    raise SGLangSourceError(
        f"pip download {requirement} succeeded but named no sglang archive in {dest}"
    )


def archive_for(version: str, cache: Path | None = None) -> Path:
    """The cached archive of an exact version, downloaded once if missing. Under a lock on
    the cache: two processes asking for a missing version at once (CI's sessions side by
    side) download it once, and neither reads the other's half-written file."""
    cache = cache or wheel_cache_dir()
    read_only = cache.is_dir() and not os.access(cache, os.W_OK)  # nothing is written there
    if not read_only:
        cache.mkdir(parents=True, exist_ok=True)
    with contextlib.nullcontext() if read_only else FileLock(str(cache / ".download.lock")):
        return cached_archive(version, cache) or download_archive(f"sglang=={version}", cache)


def fetch_wheels(versions: Iterable[str], dest: str | os.PathLike[str]) -> list[Path]:
    """Download each sglang version's archive into dest unless already there (for nox)."""
    return [archive_for(version, Path(dest)) for version in versions]


def version_key(version: str) -> tuple[int, ...]:
    """0.5.13.post1 -> (0, 5, 13, 1); releases only (no dev/rc versions in a range)."""
    numbers = re.findall(r"\d+", version.replace(".post", ".")) if _RELEASE.match(version) else []
    if not numbers:
        raise SGLangSourceError(f"{version!r} is not a release version like 0.5.23")
    base = [int(n) for n in numbers]
    return (*base, 0) if ".post" not in version else tuple(base)


def released_versions(cache: Path | None = None) -> tuple[list[str], str]:
    """(released sglang versions, where the list came from): the index, else caches."""
    cache = cache or wheel_cache_dir()
    listing = cache_root() / "audit" / "sglang-versions.json"
    if listing.is_file() and time.time() - listing.stat().st_mtime < VERSIONS_MAX_AGE_S:
        return json.loads(listing.read_text())["versions"], f"cached index list {listing}"
    try:
        out = _pip(["index", "versions", "sglang"], INDEX_TIMEOUT_S, "pip index versions sglang")
    except SGLangSourceError as error:
        if listing.is_file():
            return json.loads(listing.read_text())["versions"], f"stale cached list ({error})"
        cached = [v for e in cache.glob("sglang-*") if (v := archive_version(e.name))]
        if cached:
            return sorted(set(cached), key=version_key), f"cached wheels only ({error})"
        raise
    match = _AVAILABLE.search(out)
    versions = [v.strip() for v in match.group("versions").split(",")] if match else []
    versions = sorted((v for v in versions if _RELEASE.match(v)), key=version_key)
    listing.parent.mkdir(parents=True, exist_ok=True)
    listing.write_text(json.dumps({"versions": versions}))
    return versions, "pip index versions sglang"


def expand_versions(spec: str) -> list[str] | None:
    """`0.5.17..0.5.23` or `0.5.17,0.5.19` -> versions; None when `spec` is neither."""
    spec = spec.strip().removeprefix("sglang==")
    if ".." in spec:
        low, _, high = spec.partition("..")
        low_key, high_key = version_key(low.strip()), version_key(high.strip())
        if low_key > high_key:
            raise SGLangSourceError(f"--sglang {spec}: the range's first version is the later")
        known, _ = released_versions()
        picked = [v for v in known if low_key <= version_key(v) <= high_key]
        if not picked:
            raise SGLangSourceError(f"--sglang {spec}: no released sglang version in that range")
        return picked
    if "," in spec:
        return [part.strip().removeprefix("sglang==") for part in spec.split(",") if part.strip()]
    return None


if __name__ == "__main__":
    # python -m harness.audit.wheels DEST VERSION... : the nox-friendly entry point.
    if len(sys.argv) < 3:
        print("usage: python -m harness.audit.wheels DEST VERSION...", file=sys.stderr)
        sys.exit(2)
    for fetched in fetch_wheels(sys.argv[2:], sys.argv[1]):
        print(fetched)
