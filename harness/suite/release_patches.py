"""`engine.test_patches` entries, per release: `{version}` stands for the build's release.

A test-only patch is written against one release's code (the CPU suites' DFLASH patch:
`tests/cpu_patches/sglang-{version}-dflash-cpu.diff`, one file per release). The entry's
only field is `{version}`: no other braces, no conversion or format spec, so a template
either names one file per release or is refused when the suite is read. A build with no
patch for its release is refused before it is built (a pinned pip release) or after (a git
or local build, whose release is the installed version), naming the release and the
releases that have one.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from pathlib import Path

from harness.errors import BadInput

FIELD = "version"
PLACEHOLDER = "{" + FIELD + "}"
# A release as pip and an installed package spell it: no path separator, no brace
RELEASE = re.compile(r"[0-9][0-9A-Za-z.+!_-]*")


def check_entry(text: str) -> str:
    """The entry as given; ValueError naming what is wrong when a brace is anything but
    `{version}`."""
    try:
        parts = list(string.Formatter().parse(text))
    except ValueError as error:  # an unmatched brace
        raise ValueError(f"{text!r}: {error}; the only field is {PLACEHOLDER}") from None
    for _, name, spec, conversion in parts:
        if name is None:
            continue
        if name != FIELD or spec or conversion:
            shown = "{" + name + (f"!{conversion}" if conversion else "") + (
                f":{spec}" if spec else "") + "}"
            raise ValueError(f"{text!r}: {shown} is not a field of a test patch's path; "
                             f"the only field is {PLACEHOLDER} (the build's release)")
    if "{{" in text or "}}" in text:
        raise ValueError(f"{text!r}: an escaped brace; the only field is {PLACEHOLDER}")
    if text.count(PLACEHOLDER) > 1 or PLACEHOLDER in text.rpartition("/")[0]:
        raise ValueError(f"{text!r}: {PLACEHOLDER} goes once, in the file's name")
    return text


def per_release(text: str) -> bool:
    return PLACEHOLDER in text


def for_release(text: str, release: str) -> str:
    """The entry with `{version}` replaced by `release` (a release, never a path)."""
    if not RELEASE.fullmatch(release):
        raise ValueError(f"{release!r} is not a release")
    return text.replace(PLACEHOLDER, release)


def shown(entries: Sequence[str], release: str | None) -> list[str]:
    """The entries as a plan shows them: a known release's files, else as written."""
    if release is None:
        return list(entries)
    return [for_release(e, release) if per_release(e) else e for e in entries]


def releases_with_file(text: str, root: Path) -> list[str]:
    """The releases for which the entry names an existing file (sorted as versions)."""
    path = Path(text) if Path(text).is_absolute() else root / text
    before, _, after = path.name.partition(PLACEHOLDER)
    if PLACEHOLDER in str(path.parent) or not path.parent.is_dir():
        return []
    found = [f.name[len(before):len(f.name) - len(after)] for f in path.parent.iterdir()
             if f.is_file() and f.name.startswith(before) and f.name.endswith(after)
             and len(f.name) > len(before) + len(after)]
    return sorted((r for r in found if RELEASE.fullmatch(r)), key=_version_key)


def _version_key(release: str) -> tuple[tuple[int, int | str], ...]:
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"[.+!_-]", release))


def patch_files(entries: Sequence[str], root: Path, release: str | None,
                where: str) -> list[Path]:
    """The entries as absolute files for the build's `release`. With no release (a suite
    checked alone), a per-release entry must have a file for at least one release. A
    missing file is BadInput naming `where` (the suite and key) and the release."""
    files = []
    for text in entries:
        if not per_release(text):
            files.append(_absolute(text, root))
            continue
        known = releases_with_file(text, root)
        if release is None:
            if not known:
                raise BadInput(f"{where}: {text}: no such file for any release")
            continue
        if not RELEASE.fullmatch(release) or release not in known:
            have = ", ".join(known) or "none"
            raise BadInput(f"{where}: no test patch for sglang {release!r}: "
                           f"{text} names no file for it (releases with one: {have}); "
                           "this suite does not serve that release")
        files.append(_absolute(for_release(text, release), root))
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise BadInput(f"{where}: no such file {', '.join(missing)}")
    return files


def _absolute(text: str, root: Path) -> Path:
    return Path(text) if Path(text).is_absolute() else root / text
