"""Each SGLang version's own resolver, extracted from its source and run without SGLang."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from harness.attention import resolve_layers
from harness.audit import audit_for_build
from harness.audit.evaluate import (
    ResolverError,
    accepts_plain_dict,
    evaluate,
    extract_resolver,
    matching_behaviours,
)
from harness.audit.source import (
    DFLASH_MODEL,
    SGLangSourceError,
    archive_source,
    checkout_source,
    fetch_wheels,
    installed_source,
    spec_source,
)

from .conftest import (
    dflash2_draft,
    gemma4_dflash,
    muse_glimmer_assistant,
    nested_text_config,
    qwen3_8b_dflash,
    wheel_for,
)
from .fake_sglang import REGRESSED_MODEL, write_checkout

ALL_SHAPES = [
    gemma4_dflash,
    muse_glimmer_assistant,
    qwen3_8b_dflash,
    dflash2_draft,
    nested_text_config,
]


def test_sglang_0_5_17_wheel_gives_the_legacy_table() -> None:
    source = archive_source(wheel_for("0.5.17"))
    assert source.version == "0.5.17"
    resolver = extract_resolver(source)
    assert evaluate(resolver, gemma4_dflash()) == resolve_layers(gemma4_dflash(), "legacy")
    assert matching_behaviours(resolver) == ["legacy"]


def test_sglang_0_5_23_wheel_gives_the_fixed_table() -> None:
    source = archive_source(wheel_for("0.5.23"))
    resolver = extract_resolver(source)
    layers = evaluate(resolver, gemma4_dflash())
    assert layers == resolve_layers(gemma4_dflash(), "fixed")
    assert [layer.window for layer in layers] == [2048] * 4 + [None]  # window_left + 1
    assert matching_behaviours(resolver) == ["fixed"]
    # the fixed resolver calls PretrainedConfig.get_text_config(): a dict is not enough
    assert not accepts_plain_dict(resolver, gemma4_dflash())


@pytest.mark.parametrize("version,behaviour", [("0.5.17", "legacy"), ("0.5.23", "fixed")])
@pytest.mark.parametrize("shape", ALL_SHAPES, ids=lambda shape: shape.__name__)
def test_each_wheel_agrees_with_its_behaviour_on_every_shape(shape, version, behaviour) -> None:
    resolver = extract_resolver(archive_source(wheel_for(version)))
    assert evaluate(resolver, shape()) == resolve_layers(shape(), behaviour)


def test_regressed_checkout_is_recognised_without_importing_sglang(tmp_path: Path) -> None:
    source = checkout_source(write_checkout(tmp_path))
    assert source.version == "0.5.18.dev0" and source.kind == "checkout"
    resolver = extract_resolver(source)
    assert "_NO_WINDOW" in resolver.namespace  # module constants the helpers read come along
    assert evaluate(resolver, gemma4_dflash()) == resolve_layers(gemma4_dflash(), "regressed")
    assert matching_behaviours(resolver) == ["regressed"]
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
    assert matching_behaviours(extract_resolver(source)) == ["regressed"]


def test_installed_package_is_located_not_imported(tmp_path: Path, monkeypatch) -> None:
    write_checkout(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path / "python"))
    monkeypatch.delitem(sys.modules, "sglang", raising=False)
    source = installed_source()
    assert source.kind == "installed" and source.version == "0.5.18.dev0"
    assert "sglang" not in sys.modules  # its __init__ raises: importing it would have failed


def test_missing_resolver_names_version_and_file(tmp_path: Path) -> None:
    write_checkout(tmp_path, model="def unrelated():\n    return 1\n", version="0.6.0")
    with pytest.raises(ResolverError, match=r"sglang 0\.6\.0: sglang/srt/models/dflash\.py"):
        extract_resolver(checkout_source(tmp_path))


def test_missing_file_names_the_file(tmp_path: Path) -> None:
    write_checkout(tmp_path)
    (tmp_path / "python" / "sglang" / "srt" / "speculative" / "dflash_utils.py").unlink()
    with pytest.raises(SGLangSourceError, match=r"dflash_utils\.py"):
        checkout_source(tmp_path)


def test_resolver_that_fails_at_run_time_is_reported_not_hidden(tmp_path: Path) -> None:
    broken = REGRESSED_MODEL.replace("config.get_text_config()", "config.no_such_method()")
    write_checkout(tmp_path, model=broken, version="0.7.0")
    resolver = extract_resolver(checkout_source(tmp_path))
    with pytest.raises(ResolverError, match=r"sglang 0\.7\.0: .*layer 0: AttributeError"):
        evaluate(resolver, gemma4_dflash())


def test_unparsable_source_is_reported(tmp_path: Path) -> None:
    write_checkout(tmp_path, model="def broken(:\n", version="0.8.0")
    with pytest.raises(ResolverError, match=r"sglang 0\.8\.0: cannot parse"):
        extract_resolver(checkout_source(tmp_path))


def test_exact_spec_uses_the_cache_without_network(tmp_path: Path) -> None:
    wheel = wheel_for("0.5.23")
    (tmp_path / wheel.name).symlink_to(wheel)
    for spec in ("sglang==0.5.23", "0.5.23"):
        assert spec_source(spec, cache=tmp_path).version == "0.5.23"
    assert fetch_wheels(["0.5.23"], tmp_path) == [tmp_path / wheel.name]


def test_failed_download_is_a_clear_error(tmp_path: Path, monkeypatch) -> None:
    def refuse(command, **kwargs):
        assert "--no-deps" in command and "sglang==9.9.9" in command
        return subprocess.CompletedProcess(command, 1, "", "ERROR: No matching distribution")

    monkeypatch.setattr("harness.audit.source.subprocess.run", refuse)
    with pytest.raises(SGLangSourceError, match=r"sglang==9\.9\.9.*No matching distribution"):
        spec_source("sglang==9.9.9", cache=tmp_path)


def test_audit_for_build_accepts_paths_and_specs(tmp_path: Path, write_config) -> None:
    write_checkout(tmp_path / "checkout")
    config_path = write_config(gemma4_dflash())
    regressed = resolve_layers(gemma4_dflash(), "regressed")
    assert audit_for_build(config_path, tmp_path / "checkout") == regressed
    assert audit_for_build(gemma4_dflash(), str(tmp_path / "checkout")) == regressed
    fixed = audit_for_build(gemma4_dflash(), wheel_for("0.5.23"))
    assert fixed == resolve_layers(gemma4_dflash(), "fixed")


def test_not_installed_is_a_clear_error(monkeypatch) -> None:
    monkeypatch.setattr("harness.audit.source.importlib.util.find_spec", lambda name: None)
    with pytest.raises(SGLangSourceError, match="sglang is not installed"):
        spec_source("installed")
