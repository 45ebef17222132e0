"""Reading a version's audit inputs: archives, checkouts, commits, pins, downloads, ranges."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from harness.audit import wheels
from harness.audit.extract import (
    DFLASH_MODEL,
    ENTRY_POINT,
    RESOLVER_ROOTS,
    AttentionType,
    ExtractError,
    extract_functions,
)
from harness.audit.source import (
    archive_source,
    checkout_source,
    installed_source,
    spec_source,
    transformers_from_metadata,
    transformers_from_pyproject,
)
from harness.audit.wheels import SGLangSourceError, expand_versions, fetch_wheels
from tests.shared import libraries_loaded_by

from .conftest import RELEASES, wheel_for
from .fake_sglang import PINNED_TRANSFORMERS, REGRESSED_MODEL, write_checkout


@pytest.mark.parametrize(("version", "pin"), [("0.5.17", "transformers==5.12.1"),
                                              ("0.5.21", "transformers==5.12.1"),
                                              ("0.5.22", "transformers==5.19.0"),
                                              ("0.5.23", "transformers==5.19.0")])
def test_wheel_gives_files_patches_and_its_transformers_pin(version: str, pin: str) -> None:
    source = archive_source(wheel_for(version))
    assert (source.version, source.kind, source.transformers) == (version, "wheel", pin)
    assert ENTRY_POINT in source.files[DFLASH_MODEL]
    assert "def apply_all" in source.patches["patches"]


def test_checkout_reads_the_pin_from_pyproject(tmp_path: Path) -> None:
    source = checkout_source(write_checkout(tmp_path))
    assert source.version == "0.5.18.dev0" and source.kind == "checkout"
    assert source.transformers == PINNED_TRANSFORMERS
    assert "sglang" not in sys.modules


@pytest.mark.parametrize("subfolder", ["", "python", "python/sglang"])
def test_checkout_found_from_root_python_or_package(tmp_path: Path, subfolder: str) -> None:
    write_checkout(tmp_path)
    assert checkout_source(tmp_path / subfolder).files[DFLASH_MODEL] == REGRESSED_MODEL


def test_sdist_is_read_without_unpacking(tmp_path: Path) -> None:
    write_checkout(tmp_path / "tree")
    sdist = tmp_path / "sglang-0.5.18.dev0.tar.gz"
    with tarfile.open(sdist, "w:gz") as bundle:
        bundle.add(tmp_path / "tree" / "python", arcname="sglang-0.5.18.dev0")
    source = archive_source(sdist)
    assert (source.kind, source.version) == ("sdist", "0.5.18.dev0")
    assert source.transformers == PINNED_TRANSFORMERS


def test_installed_package_is_located_not_imported(tmp_path: Path, monkeypatch) -> None:
    write_checkout(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path / "python"))
    monkeypatch.delitem(sys.modules, "sglang", raising=False)
    source = installed_source()
    assert source.kind == "installed" and source.version == "0.5.18.dev0"
    assert "sglang" not in sys.modules  # its __init__ raises: importing it would have failed


def test_missing_file_names_the_file(tmp_path: Path) -> None:
    write_checkout(tmp_path)
    (tmp_path / "python" / "sglang" / "srt" / "speculative" / "dflash_utils.py").unlink()
    with pytest.raises(SGLangSourceError, match=r"dflash_utils\.py"):
        checkout_source(tmp_path)


def test_extraction_compiles_only_the_resolver(tmp_path: Path) -> None:
    source = checkout_source(write_checkout(tmp_path))
    namespace, names = extract_functions(source.files, RESOLVER_ROOTS, ENTRY_POINT, "x")
    assert "_NO_WINDOW" in namespace  # module constants the helpers read come along
    assert "DFlashDraftModel" not in namespace and "torch" not in namespace
    assert set(names) >= {ENTRY_POINT, "_get_dflash_attention_type", "_cfg_get"}
    assert namespace[ENTRY_POINT]({"num_hidden_layers": 1}, 0) == (-1, AttentionType.ENCODER_ONLY)
    with pytest.raises(AttributeError, match="get_text_config"):  # its own code, as written
        namespace[ENTRY_POINT]({"layer_types": ["full_attention"]}, 0)


def test_missing_or_unparsable_resolver_is_an_extract_error(tmp_path: Path) -> None:
    with pytest.raises(ExtractError, match=f"define no {ENTRY_POINT}"):
        extract_functions({DFLASH_MODEL: "def unrelated():\n    return 1\n"}, RESOLVER_ROOTS,
                          ENTRY_POINT, "x")  # fmt: skip
    with pytest.raises(ExtractError, match="cannot parse"):
        extract_functions({DFLASH_MODEL: "def broken(:\n"}, RESOLVER_ROOTS, ENTRY_POINT, "x")


def test_pins_read_from_metadata_and_pyproject() -> None:
    metadata = ("Requires-Dist: torch==2.9\nRequires-Dist: transformers; extra == 'x'\n"
                "Requires-Dist: transformers == 5.19.0\n")  # fmt: skip
    assert transformers_from_metadata(metadata) == "transformers==5.19.0"
    assert transformers_from_metadata("Requires-Dist: torch\n") is None
    assert transformers_from_pyproject(
        '[project]\ndependencies = ["transformers>=5.0; python_version>\'3\'"]'
    ) == "transformers>=5.0"


def test_exact_spec_uses_the_cache_without_network(tmp_path: Path, monkeypatch) -> None:
    wheel = wheel_for("0.5.23")
    (tmp_path / wheel.name).symlink_to(wheel)

    def no_network(*args, **kwargs):
        raise AssertionError("a cached version must not reach the index")

    monkeypatch.setattr(wheels.subprocess, "run", no_network)
    for spec in ("sglang==0.5.23", "0.5.23"):
        assert spec_source(spec, cache=tmp_path).version == "0.5.23"
    assert fetch_wheels(["0.5.23"], tmp_path) == [tmp_path / wheel.name]


# One process fetching a version missing from the cache: its download (pip's, replaced
# here) writes the archive slowly, naming each call in a log beside it.
SLOW_FETCH = """
import sys, time
from harness.audit import wheels

def slow_download(requirement, dest):
    with open(dest / "downloads.log", "a") as log:
        log.write(requirement + "\\n")
    path = dest / "sglang-0.5.23-py3-none-any.whl"
    with open(path, "wb") as archive:
        for _ in range(5):
            archive.write(b"x" * 1000)
            archive.flush()
            time.sleep(0.2)
    return path

wheels.download_archive = slow_download
[path] = wheels.fetch_wheels(["0.5.23"], sys.argv[1])
print(path.stat().st_size)
"""


def test_two_processes_fetching_a_missing_version_download_it_once(tmp_path: Path) -> None:
    fetches = [subprocess.Popen([sys.executable, "-c", SLOW_FETCH, str(tmp_path)],
                                stdout=subprocess.PIPE, text=True) for _ in range(2)]
    sizes = [fetch.communicate(timeout=120)[0].strip() for fetch in fetches]
    assert [fetch.returncode for fetch in fetches] == [0, 0]
    assert sizes == ["5000", "5000"]  # neither took the other's half-written archive
    assert (tmp_path / "downloads.log").read_text().splitlines() == ["sglang==0.5.23"]


def test_failed_download_is_a_clear_error(tmp_path: Path, monkeypatch) -> None:
    def refuse(command, **kwargs):
        assert "--no-deps" in command and "sglang==9.9.9" in command and kwargs["timeout"]
        return subprocess.CompletedProcess(command, 1, "", "ERROR: No matching distribution")

    monkeypatch.setattr(wheels.subprocess, "run", refuse)
    with pytest.raises(SGLangSourceError, match=r"sglang==9\.9\.9.*No matching distribution"):
        spec_source("sglang==9.9.9", cache=tmp_path)


def test_unreachable_index_is_bounded_and_says_so(tmp_path: Path, monkeypatch) -> None:
    def hang(command, **kwargs):
        raise subprocess.TimeoutExpired(command, kwargs["timeout"])

    monkeypatch.setattr(wheels.subprocess, "run", hang)
    with pytest.raises(SGLangSourceError, match=r"no answer within .* reachable"):
        spec_source("0.5.99", cache=tmp_path)


def test_range_uses_the_released_versions_once(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path))
    calls = []

    def index(command, **kwargs):
        calls.append(command)
        listed = ", ".join(reversed([*RELEASES, "0.5.16", "0.5.15.post1", "0.5.24"]))
        return subprocess.CompletedProcess(command, 0, f"sglang (0.5.24)\n"
                                           f"Available versions: {listed}\n", "")  # fmt: skip

    monkeypatch.setattr(wheels.subprocess, "run", index)
    assert expand_versions("0.5.17..0.5.23") == list(RELEASES)
    assert expand_versions("0.5.15..0.5.16") == ["0.5.15.post1", "0.5.16"]
    assert len(calls) == 1  # the list is cached for a day
    assert expand_versions("0.5.17,sglang==0.5.23") == ["0.5.17", "0.5.23"]
    assert expand_versions("0.5.23") is None
    with pytest.raises(SGLangSourceError, match="first version is the later"):
        expand_versions("0.5.23..0.5.17")


def test_range_offline_falls_back_to_a_stale_list(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path))
    listing = tmp_path / "audit" / "sglang-versions.json"
    listing.parent.mkdir(parents=True)
    listing.write_text(json.dumps({"versions": ["0.5.17", "0.5.18"]}))
    old = time.time() - 3 * 24 * 3600
    import os

    os.utime(listing, (old, old))

    def hang(command, **kwargs):
        raise subprocess.TimeoutExpired(command, kwargs["timeout"])

    monkeypatch.setattr(wheels.subprocess, "run", hang)
    versions, where = wheels.released_versions()
    assert versions == ["0.5.17", "0.5.18"] and where.startswith("stale cached list")


def test_version_from_the_build_written_version_file(tmp_path: Path) -> None:
    write_checkout(tmp_path)
    package = tmp_path / "python" / "sglang"
    (package / "version.py").write_text("from sglang._version import __version__\n")
    (package / "_version.py").write_text("__version__ = version = '0.5.17'\n")
    assert checkout_source(tmp_path).version == "0.5.17"


def test_installed_folder_takes_the_pin_of_its_own_dist_info(tmp_path: Path) -> None:
    write_checkout(tmp_path)
    parent = tmp_path / "python"
    (parent / "pyproject.toml").unlink()
    (parent / "sglang" / "version.py").write_text('__version__ = "0.5.17"\n')
    for version, pin in (("0.5.16", "transformers==4.0"), ("0.5.17", "transformers==5.12.1")):
        info = parent / f"sglang-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Name: sglang\nRequires-Dist: {pin}\n")
    assert checkout_source(tmp_path).transformers == "transformers==5.12.1"


def test_importing_harness_audit_stays_light() -> None:
    heavy = {"pydantic", "rich", "transformers", "torch", "huggingface_hub", "filelock"}
    assert libraries_loaded_by("harness.audit", heavy) == []
