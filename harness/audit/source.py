"""Locate and read the DFlash resolver files of one SGLang version, without importing it.

A version comes from the installed package (found with `importlib.util.find_spec`, which
does not import it), a wheel or sdist (downloaded with `pip download` into a cache, read
straight out of the archive), or a source checkout. Only the two resolver files are read.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.errors import BadInput

DFLASH_MODEL = "sglang/srt/models/dflash.py"
DFLASH_UTILS = "sglang/srt/speculative/dflash_utils.py"
RESOLVER_FILES: tuple[str, ...] = (DFLASH_MODEL, DFLASH_UTILS)
VERSION_FILE = "sglang/version.py"

ARCHIVE_SUFFIXES = (".whl", ".tar.gz", ".zip")
_EXACT_SPEC = re.compile(r"^sglang\s*==\s*(?P<version>[0-9][0-9A-Za-z.+!-]*)$")
_BARE_VERSION = re.compile(r"^[0-9][0-9A-Za-z.+!-]*$")
_PIP_SAVED = re.compile(r"(?:Saved|File was already downloaded)\s+(?P<path>\S+)")
_VERSION_ASSIGN = re.compile(r"""__version__\s*=\s*["'](?P<version>[^"']+)["']""")


class SGLangSourceError(BadInput):
    """A version's resolver files could not be found or read; the message names both."""


@dataclass(frozen=True)
class SGLangSource:
    """The resolver files of one SGLang version, as text, and where they came from."""

    version: str | None
    origin: str  # the wheel, sdist, checkout or installed package folder
    kind: str  # "installed", "wheel", "sdist", "checkout"
    files: Mapping[str, str]  # RESOLVER_FILES path -> source text

    @property
    def label(self) -> str:
        return f"sglang {self.version or '(unknown version)'}"

    def describe(self) -> str:
        return f"{self.label} ({self.kind} {self.origin})"


def wheel_cache_dir() -> Path:
    """Where downloaded wheels are kept: $HARNESS_SGLANG_WHEELS, else the harness cache."""
    if explicit := os.environ.get("HARNESS_SGLANG_WHEELS"):
        return Path(explicit)
    from harness.build import cache_root

    return cache_root() / "sglang-wheels"


def _read_version_text(text: str | None) -> str | None:
    if text is None:
        return None
    match = _VERSION_ASSIGN.search(text)
    return match.group("version") if match else None


def _missing(files: Iterable[str], version: str | None, origin: str) -> SGLangSourceError:
    names = ", ".join(files)
    return SGLangSourceError(
        f"sglang {version or '(unknown version)'} at {origin} has no {names}: "
        "this version's DFlash resolver cannot be found"
    )


def _from_folder(package_parent: Path, kind: str, version: str | None) -> SGLangSource:
    """Read the resolver files below a folder that holds the `sglang/` package."""
    missing = [name for name in RESOLVER_FILES if not (package_parent / name).is_file()]
    if missing:
        raise _missing(missing, version, str(package_parent))
    files = {name: (package_parent / name).read_text(encoding="utf-8") for name in RESOLVER_FILES}
    if version is None:
        version_file = package_parent / VERSION_FILE
        if version_file.is_file():
            version = _read_version_text(version_file.read_text(encoding="utf-8"))
    return SGLangSource(version, str(package_parent), kind, files)


def installed_source() -> SGLangSource:
    """The installed sglang, found without importing it (importing pulls in torch and CUDA)."""
    # find_spec on a top-level name only locates it; a dotted name would import the parents.
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        raise SGLangSourceError("sglang is not installed in this Python environment")
    package_dir = Path(next(iter(spec.submodule_search_locations)))
    try:
        version: str | None = importlib.metadata.version("sglang")
    except importlib.metadata.PackageNotFoundError:
        version = None
    return _from_folder(package_dir.parent, "installed", version)


def checkout_source(path: str | os.PathLike[str]) -> SGLangSource:
    """A source checkout: the repository root, its `python/` folder, or the package folder."""
    root = Path(path).expanduser()
    if not root.exists():
        raise SGLangSourceError(f"SGLang source path {root} does not exist")
    # A clone is often itself named `sglang`: try every layout rather than guess from names.
    for candidate in (root / "python", root, root.parent):
        if (candidate / DFLASH_MODEL).is_file():
            return _from_folder(candidate, "checkout", None)
    raise _missing(RESOLVER_FILES, None, str(root))


def _archive_version(name: str) -> str | None:
    # wheel: sglang-0.5.23-cp311-...whl; sdist: sglang-0.5.23.tar.gz
    match = re.match(r"^sglang-(?P<version>[0-9][^-]*?)(?:-|\.tar\.gz$|\.zip$)", name)
    return match.group("version") if match else None


def _pick_members(names: Iterable[str], wanted: Iterable[str]) -> dict[str, str]:
    """Map each wanted package path to the archive member ending in it (sdists add a prefix)."""
    picked: dict[str, str] = {}
    for wanted_name in wanted:
        matches = [n for n in names if n == wanted_name or n.endswith("/" + wanted_name)]
        if matches:
            picked[wanted_name] = min(matches, key=len)
    return picked


def archive_source(path: str | os.PathLike[str]) -> SGLangSource:
    """A wheel or sdist, read without unpacking it to disk."""
    archive = Path(path).expanduser()
    version = _archive_version(archive.name)
    if not archive.is_file():
        raise SGLangSourceError(f"SGLang archive {archive} does not exist")
    wanted = (*RESOLVER_FILES, VERSION_FILE)
    texts: dict[str, str] = {}
    try:
        if archive.name.endswith((".whl", ".zip")):
            kind = "wheel" if archive.name.endswith(".whl") else "sdist"
            with zipfile.ZipFile(archive) as bundle:
                for name, member in _pick_members(bundle.namelist(), wanted).items():
                    texts[name] = bundle.read(member).decode("utf-8")
        else:
            kind = "sdist"
            with tarfile.open(archive) as bundle:
                for name, member in _pick_members(bundle.getnames(), wanted).items():
                    extracted = bundle.extractfile(member)
                    if extracted is not None:
                        texts[name] = extracted.read().decode("utf-8")
    except (zipfile.BadZipFile, tarfile.TarError, OSError, UnicodeDecodeError) as error:
        raise SGLangSourceError(
            f"sglang {version or '(unknown version)'}: cannot read archive {archive}: {error}"
        ) from error
    missing = [name for name in RESOLVER_FILES if name not in texts]
    if missing:
        raise _missing(missing, version, str(archive))
    version = version or _read_version_text(texts.get(VERSION_FILE))
    files = {name: texts[name] for name in RESOLVER_FILES}
    return SGLangSource(version, str(archive), kind, files)


def cached_archive(version: str, cache: Path) -> Path | None:
    """A wheel (preferred) or sdist of exactly this version already in the cache."""
    if not cache.is_dir():
        return None
    found = [
        entry
        for entry in sorted(cache.iterdir())
        if entry.name.endswith(ARCHIVE_SUFFIXES) and _archive_version(entry.name) == version
    ]
    wheels = [entry for entry in found if entry.name.endswith(".whl")]
    return (wheels or found or [None])[0]


def download_archive(requirement: str, dest: Path) -> Path:
    """`pip download --no-deps --only-binary=:all:` one sglang requirement into dest."""
    dest.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--disable-pip-version-check", "--dest", str(dest), requirement,
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
        raise SGLangSourceError(
            f"cannot download {requirement} (pip download exited {result.returncode}): "
            + " | ".join(tail)
        )
    for match in _PIP_SAVED.finditer(result.stdout):
        saved = Path(match.group("path"))
        saved = saved if saved.is_absolute() else dest / saved.name
        if saved.name.startswith("sglang-") and saved.exists():
            return saved
    raise SGLangSourceError(
        f"pip download {requirement} succeeded but named no sglang archive in {dest}"
    )


def spec_source(spec: str, cache: Path | None = None) -> SGLangSource:
    """`--sglang SPEC`: `installed`, an archive path, `sglang==X`, `X`, or any pip requirement."""
    spec = spec.strip()
    if spec == "installed":
        return installed_source()
    if spec.endswith(ARCHIVE_SUFFIXES) or os.sep in spec:
        return archive_source(spec)
    cache = cache or wheel_cache_dir()
    exact = _EXACT_SPEC.match(spec)
    version = exact.group("version") if exact else spec if _BARE_VERSION.match(spec) else None
    if version is not None:
        # An exact version already cached needs no network: offline CI keeps working.
        if (hit := cached_archive(version, cache)) is not None:
            return archive_source(hit)
        return archive_source(download_archive(f"sglang=={version}", cache))
    if not spec.startswith("sglang"):
        raise SGLangSourceError(
            f"--sglang {spec!r} is not a version, a sglang requirement, an archive or 'installed'"
        )
    return archive_source(download_archive(spec, cache))


def resolve_source(sglang: str | None, sglang_source: str | None) -> SGLangSource | None:
    """The version the CLI asks for; None when neither flag is given."""
    if sglang and sglang_source:
        raise BadInput("give either --sglang or --sglang-source, not both")
    if sglang_source:
        return checkout_source(sglang_source)
    if sglang:
        return spec_source(sglang)
    return None


def fetch_wheels(versions: Iterable[str], dest: str | os.PathLike[str]) -> list[Path]:
    """Download each sglang version's archive into dest unless already there (for nox).

    `nox -s tests` calls this before pytest so that the source-evaluation tests find the
    wheels offline afterwards; versions already cached cost nothing.
    """
    dest_path = Path(dest)
    archives = []
    for version in versions:
        hit = cached_archive(version, dest_path)
        archives.append(hit or download_archive(f"sglang=={version}", dest_path))
    return archives


if __name__ == "__main__":
    # python -m harness.audit.source DEST VERSION... : the nox-friendly entry point.
    if len(sys.argv) < 3:
        print("usage: python -m harness.audit.source DEST VERSION...", file=sys.stderr)
        sys.exit(2)
    for fetched in fetch_wheels(sys.argv[2:], sys.argv[1]):
        print(fetched)
