"""A parameter file of tens of thousands of unknown keys costs a lookup per key.

Each unknown name used to get its own "did you mean" search (difflib against
every registered name) and its own warning: a 1 MiB file of 60,000 unknown
keys took 6.8 s to start a session. The searches and the warnings are now
capped; the count of searches is what is checked (never a time).
"""

from __future__ import annotations

import sys
import warnings

import pmca
from pmca.mca.params import ParamWarning
from pmca.runtime._runtime import UNKNOWN_WARNINGS
from pmca.runtime._unknown import SUGGESTIONS

_PREFIXES = ("btl_zz", "mca_zz", "zz")


def _file_of_unknown_keys(path) -> int:  # type: ignore[no-untyped-def]
    lines, size = [], 0
    while True:
        index = len(lines)
        line = f"{_PREFIXES[index % 3]}{index}_unknown_{index:06d} = {index}\n"
        if size + len(line) > 1 << 20:
            break
        lines.append(line)
        size += len(line)
    path.write_text("".join(lines))
    return len(lines)


def test_a_megabyte_of_unknown_keys_is_warned_about_cheaply(pmca_env, tmp_path) -> None:
    conf = tmp_path / "many.conf"
    keys = _file_of_unknown_keys(conf)
    assert keys > 30_000
    searches = 0

    def count(frame, event, _arg):  # type: ignore[no-untyped-def]
        nonlocal searches
        if event == "call" and frame.f_code.co_name == "get_close_matches":
            searches += 1

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sys.setprofile(count)
        try:
            with pmca.Session(mca={"mca_base_param_files": str(conf)}):
                pass
        finally:
            sys.setprofile(None)
    unknown = [w for w in caught if issubclass(w.category, ParamWarning)]
    # One warning each for the first names, one line for the rest: nothing lost.
    assert len(unknown) == UNKNOWN_WARNINGS + 1, len(unknown)
    assert "unknown MCA parameter" in str(unknown[0].message)
    assert "more unknown MCA parameters are ignored" in str(unknown[-1].message)
    assert searches <= SUGGESTIONS, searches
