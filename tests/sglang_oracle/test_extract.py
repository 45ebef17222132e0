"""The extraction refuses what it cannot run faithfully, naming file, function and names."""

from __future__ import annotations

import ast
import traceback

import pytest

from .extract import OracleError, Source, build_class, instance

MODULE = '''
class Reporter:
    def update(self, bs):
        self.count += bs
        return get_spec().size

    def fold(self):
        from sglang.srt.speculative.ragged_verify import read_mode
        return read_mode()

    def broken(self):
        return 1 / 0
'''


def module() -> Source:
    return Source("9.9.9", "sglang/srt/x.py", ast.parse(MODULE), "sglang-9.9.9.whl")


def test_a_global_no_stand_in_provides_is_refused() -> None:
    with pytest.raises(OracleError, match=r"sglang 9.9.9 sglang/srt/x.py: update .*get_spec"):
        build_class(module(), "Reporter", ["update"], {})


def test_a_self_attribute_left_unset_is_refused() -> None:
    cls = build_class(module(), "Reporter", ["update"], {"get_spec": lambda: None})
    with pytest.raises(OracleError, match=r"reads self\.count"):
        instance(cls)
    assert instance(cls, count=0).count == 0


def test_an_import_of_sglang_itself_is_refused() -> None:
    cls = build_class(module(), "Reporter", ["fold"], {})
    with pytest.raises(OracleError, match=r"imports sglang\.srt\.speculative\.ragged_verify"):
        instance(cls).fold()


def test_tracebacks_point_into_the_wheel() -> None:
    obj = instance(build_class(module(), "Reporter", ["broken"], {}))
    with pytest.raises(ZeroDivisionError) as raised:
        obj.broken()
    frame = traceback.extract_tb(raised.value.__traceback__)[-1]
    assert frame.filename == "sglang-9.9.9.whl!sglang/srt/x.py"
    assert frame.lineno == MODULE.splitlines().index("        return 1 / 0") + 1
