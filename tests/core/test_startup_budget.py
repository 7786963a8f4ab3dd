"""Start-up budgets: how many modules ``import pmca``, ``pmca info`` and a session import.

Each is counted in a fresh interpreter (what its ``site`` imported is left
out), pmca's own modules apart from the rest (the standard library's and
pmca's dependencies', whose counts move a little between Python versions).
A change that pulls a heavy import into one of these starts (``email`` and
``zipfile`` through ``importlib_metadata``, ``asyncio`` through structlog,
``logging``...) exceeds its budget, or is named below, and fails here.
"""

from __future__ import annotations

import json
import textwrap

import pytest

from pmca.testing import run_python

#: Never imported by any of the starts below: each is imported where it is used.
HEAVY = (
    "argparse",  # only by the command line (pmca info parses its options: allowed there)
    "asyncio",
    "email",
    "importlib_metadata",
    "logging",
    "structlog",
    "zipfile",
    "zlib",
)

#: (what, code run after the count starts, pmca's modules at most, other modules at most,
#:  heavy modules it may import). Measured with Python 3.10 to 3.13 (pmca's: 3, 102 and
#:  133; others at most 5, 102 and 106), plus a small margin; pmca's again with 3.11 once
#:  registering stopped importing what only a query needs (3, 96 and 134).
STARTS = (
    ("import pmca", "import pmca", 4, 7, ()),
    (
        "pmca info computed afresh",
        """
        import contextlib, io
        sys.argv = ["pmca", "info"]
        from pmca.cli import main
        with contextlib.redirect_stdout(io.StringIO()) as out:
            assert main() == 0
        assert "MCA memory" in out.getvalue()
        """,
        99,
        106,
        ("argparse",),
    ),
    (
        "a session with its btls opened",
        """
        import pmca
        s = pmca.Session().init()
        assert s.modules("btl")
        s.finalize()
        """,
        # 138 measured: tcp's bulk bodies and sm's ctypes bindings are modules of
        # their own (split for size, no new work at start)
        139,
        110,
        (),
    ),
)


#: The modules imported since ``before``, printed as JSON (``json`` itself after the count).
REPORT = "new = sorted(set(sys.modules) - before)\nimport json\nprint(json.dumps(new))\n"


@pytest.mark.parametrize(
    ("what", "code", "own_budget", "other_budget", "allowed"),
    STARTS,
    ids=[start[0] for start in STARTS],
)
def test_a_fresh_start_imports_no_more_than_its_budget(
    what: str, code: str, own_budget: int, other_budget: int, allowed: tuple[str, ...]
) -> None:
    counted = textwrap.dedent(code).strip("\n")
    source = f"import sys\nbefore = set(sys.modules)\n{counted}\n" + REPORT
    child = run_python(source, env={"PMCA_INFO_CACHE": "none"}, threaded=False, faulthandler=False)
    assert child.returncode == 0, child.stderr
    imported: list[str] = json.loads(child.stdout.splitlines()[-1])
    own = [name for name in imported if name == "pmca" or name.startswith("pmca.")]
    other = [name for name in imported if name not in own]
    heavy = sorted({name.partition(".")[0] for name in other} & set(HEAVY) - set(allowed))
    assert heavy == [], f"{what} imports {heavy}"
    assert len(own) <= own_budget, f"{what}: {len(own)} of pmca's modules:\n{own}"
    assert len(other) <= other_budget, f"{what}: {len(other)} other modules:\n{other}"
