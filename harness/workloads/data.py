"""Where a workload's rows come from, and the hash that names them.

A kind looks for its file in this order: the suite's `workload.data` path;
`$HARNESS_DATA_DIR/<file>`; `../shared/data/<file>` beside the checkout; else the
usual `datasets` download (`datasets.load_dataset(id, config, split=...)`), cached in
the usual Hugging Face cache (`HF_HOME`, `HF_DATASETS_CACHE`), with `HF_DATASETS_OFFLINE`
/ `HF_HUB_OFFLINE` honoured by `datasets` itself. `$HARNESS_HF_MIRROR` names a folder
holding hub repositories laid out as on the hub (`<mirror>/<org>/<name>/...`): an
air-gapped host (or a test) points it at local copies and `datasets` reads them there.

The data hash is over canonical rows, not file bytes: each row reduced to the fields the
protocol reads, as compact JSON with sorted keys (UTF-8, not ASCII-escaped), one line
each, in order. A JSON-lines file and the hub's parquet files holding the same rows give
the same hash, so a record says which rows ran whichever source served them. The bytes
of a local file are hashed too (`file_sha256`), as a check on the copy.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from harness.errors import BadInput

DATA_ENV = "HARNESS_DATA_DIR"
MIRROR_ENV = "HARNESS_HF_MIRROR"
REPO_ROOT = Path(__file__).resolve().parents[2]
OFFLINE_ENVS = ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE")
HUB_PROBE_TIMEOUT_S = 3.0


@dataclass(frozen=True)
class HubRef:
    """A data set on the Hugging Face hub, or a JSON-lines URL read through `datasets`."""

    id: str
    config: str | None = None
    split: str = "test"
    revision: str | None = None
    # A JSON-lines file of a repository (not a hub data set): read with the "json" builder
    # from `url`, or from `<mirror>/<id>/<path>` under $HARNESS_HF_MIRROR.
    url: str | None = None
    path: str | None = None

    def describe(self) -> str:
        if self.url:
            return f"datasets:json {self.url}"
        parts = [self.id, self.config, self.split]
        return "hf:" + "/".join(p for p in parts if p) + (f"@{self.revision}"
                                                           if self.revision else "")


@dataclass(frozen=True)
class Dataset:
    rows: list[dict[str, object]]  # canonical rows: only the protocol's fields
    source: str  # a file path, or hf:<id>/<config>/<split>
    sha256: str  # of the canonical rows
    file_sha256: str | None = None  # of a local file's bytes


def text_of(row: Mapping[str, object], name: str) -> str:
    """A canonical row's text field. The kind's `canonical` checked it when the row was
    read, so anything else is this harness's bug, not the data's."""
    value = row[name]
    if not isinstance(value, str):
        raise TypeError(f"canonical row field {name!r} is {type(value).__name__}, not str")
    return value


def texts_of(row: Mapping[str, object], name: str) -> list[str]:
    """A canonical row's text or list of texts (a prompt's turns), as a list."""
    value = row[name]
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TypeError(f"canonical row field {name!r} is not a list of str")
    return [str(v) for v in value]


def canonical_sha256(rows: Sequence[dict[str, object]]) -> str:
    text = "".join(json.dumps(row, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
                   + "\n" for row in rows)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def local_candidates(relative: str) -> list[Path]:
    """Where a local copy of `relative` (e.g. "gsm8k/test.jsonl") may lie."""
    candidates = []
    if os.environ.get(DATA_ENV):
        candidates.append(Path(os.environ[DATA_ENV]) / relative)
    candidates.append(REPO_ROOT.parent / "shared" / "data" / relative)
    return candidates


def read_lines(raw: bytes, source: str, what: str) -> list[tuple[int, dict[str, object]]]:
    """(line number, object) per non-blank JSON line; lines end only at "\\n" (JSON
    strings may hold raw U+2028 and friends). BadInput names the file and line."""
    if source.endswith(".gz"):
        raw = gzip.decompress(raw)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise BadInput(f"{source}: not UTF-8 text ({error})") from None
    items = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError as error:
            raise BadInput(f"{source}:{number}: not a {what} row ({error})") from None
        except RecursionError:  # the decoder recurses once per nested array or object
            raise BadInput(f"{source}:{number}: not a {what} row (nested too deep to "
                           "parse)") from None
        if not isinstance(item, dict):
            raise BadInput(f"{source}:{number}: not a {what} row (not a JSON object)")
        items.append((number, item))
    return items


def hub_reachable(url: str | None = None, timeout_s: float = HUB_PROBE_TIMEOUT_S) -> bool:
    """Whether a TCP connection to the hub (or the URL's host) opens within `timeout_s`.
    `datasets` retries an unreachable hub five times with back-off before it gives up;
    a host with no network is told so at once instead."""
    parts = urlsplit(url or os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host = parts.hostname or "huggingface.co"
    port = parts.port or (80 if parts.scheme == "http" else 443)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except (OSError, ValueError):
        return False


def _offline_names() -> list[str]:
    return [name for name in OFFLINE_ENVS if os.environ.get(name, "") not in ("", "0")]


def load_hub(ref: HubRef) -> list[dict[str, object]]:
    """The rows of a hub data set (or a JSON-lines URL) through `datasets`."""
    mirror = os.environ.get(MIRROR_ENV)
    no_network = not (mirror and (Path(mirror) / ref.id).is_dir()) and not _offline_names() \
        and not hub_reachable(ref.url)
    saved = {name: os.environ.get(name) for name in OFFLINE_ENVS}
    if no_network:
        # `datasets` would retry an unreachable hub for minutes; offline, it reads its cache
        # only (a data set downloaded before still loads) and fails at once otherwise.
        # It reads these variables when first imported, so they are set for that only.
        if "datasets" in sys.modules:
            print(f"the hub is unreachable: `datasets` retries {ref.describe()} before it "
                  "gives up", file=sys.stderr, flush=True)
        else:
            os.environ.update(dict.fromkeys(OFFLINE_ENVS, "1"))
    try:
        import datasets  # heavy: only when no local copy exists
    except ImportError:
        raise BadInput(f"no local copy of the data and the `datasets` package is not "
                       f"installed (it is a dependency of spec-harness: reinstall it), so "
                       f"{ref.describe()} cannot be loaded") from None
    finally:
        for name, value in saved.items():  # the process's own environment, as it was
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    local = Path(mirror) / ref.id if mirror else None
    if local is not None and not local.is_dir():
        local = None
    try:
        if ref.url is not None:
            files = str(local / (ref.path or "")) if local is not None else ref.url
            dataset = datasets.load_dataset("json", data_files={ref.split: files},
                                            split=ref.split)
        elif local is not None:
            dataset = datasets.load_dataset(str(local), ref.config, split=ref.split)
        else:
            dataset = datasets.load_dataset(ref.id, ref.config, split=ref.split,
                                            revision=ref.revision)
    except Exception as error:  # the hub raises many kinds; all mean "not available"
        offline = _offline_names()
        hint = (" (no network: the hub is unreachable, so only the Hugging Face cache is "
                "read)" if no_network else
                f" ({', '.join(offline)} is set: only the Hugging Face cache is read)"
                if offline else "")
        why = " ".join(f"{type(error).__name__}: {error}".split())  # one line
        raise BadInput(f"cannot load {ref.describe()} with `datasets`{hint}: "
                       f"{why[:300]}") from None
    return [dict(row) for row in dataset]


def missing_data_help(relative: str) -> str:
    """The three ways to give a kind its data, for when none worked (one line)."""
    shared = REPO_ROOT.parent / "shared" / "data"
    text = (f"give it one of three ways: set {DATA_ENV} to a folder holding {relative} "
            f"(the layout it expects: $HARNESS_DATA_DIR/{relative}), or put the file at "
            f"../shared/data/{relative} beside the checkout ({shared / relative}), or let "
            f"`datasets` fetch it from the Hugging Face hub (network, {' and '.join(OFFLINE_ENVS)}"
            " unset)")
    folder = os.environ.get(DATA_ENV)
    first, _, rest = relative.partition("/")
    if folder and rest:
        given = Path(folder)
        if given.name == first or (given / rest).is_file():
            text += (f"; note: {DATA_ENV}={folder} looks like the {first} folder itself: "
                     f"point it at the folder above it ({given.parent})")
    return text


def load(relative: str, explicit: str | None, hub: HubRef | None, what: str,
         canonical: Callable[[str, list[tuple[int, dict[str, object]]]], list[dict[str, object]]],
         also: Sequence[Path] = ()) -> Dataset:
    """A kind's rows: the explicit file, else a local copy (then the paths `also`), else
    `hub` through `datasets`.

    `canonical(source, [(line, raw row)])` checks each raw row (BadInput naming the
    source and line) and returns the canonical rows, in order.
    """
    candidates = [Path(explicit)] if explicit else [*local_candidates(relative), *also]
    for candidate in candidates:
        if candidate.is_file():
            raw = candidate.read_bytes()
            rows = canonical(str(candidate), read_lines(raw, str(candidate), what))
            return Dataset(rows, str(candidate), canonical_sha256(rows),
                           hashlib.sha256(raw).hexdigest())
    if explicit:
        raise BadInput(f"workload.data: no such file {explicit}")
    if hub is None:
        raise BadInput(f"no {relative} found in {', '.join(map(str, candidates))}")
    source = hub.describe()
    try:
        loaded = load_hub(hub)
    except BadInput as error:
        raise BadInput(f"{error.message}; no local copy of {relative} either: "
                       f"{missing_data_help(relative)}") from None
    rows = canonical(source, list(enumerate(loaded, start=1)))
    return Dataset(rows, source, canonical_sha256(rows))


def field(item: dict[str, object], name: str, source: str, number: int, what: str,
          kinds: tuple[type, ...] = (str,)) -> object:
    """`item[name]`, of one of `kinds`; BadInput naming the file, line and field."""
    if name not in item:
        raise BadInput(f"{source}:{number}: not a {what} row (no field {name!r})")
    value = item[name]
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise BadInput(f"{source}:{number}: not a {what} row ({name!r} is "
                       f"{type(value).__name__}, not {' or '.join(k.__name__ for k in kinds)})")
    return value
