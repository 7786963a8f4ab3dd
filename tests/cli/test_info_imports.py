"""``pmca info`` imports what it shows, not what other subcommands need."""

from __future__ import annotations

from pmca.testing import run_python

#: Modules a plain ``pmca info`` has no use for: ``pmca new``'s templates,
#: the standard library's logging (nothing is logged through it), shutil
#: (argparse's formatters asked it for the terminal's width), textwrap (only
#: for wrapping on a terminal), the failure records (nothing failed),
#: pathlib (the build facts read the libraries through ``str`` paths), json
#: (the build record is read as a Python literal), what only a component's
#: query needs (info registers the components and queries none: the btl
#: module interface, the modules memory, patcher and rcache components make).
UNNEEDED = (
    "pmca.btl._interface",
    "pmca.memory.patcher._module",
    "pmca.memory.ucm._module",
    "pmca.patcher.overwrite._module",
    "pmca.patcher.overwrite._table",
    "pmca.rcache.grdma._module",
    "pmca.rcache.grdma._tree",
    "json",
    "pathlib",
    "pmca.cli._new",
    "pmca.cli._templates",
    "logging",
    "shutil",
    "textwrap",
    "pmca.mca._failures",
    "pmca.runtime._failures",
)


def test_a_plain_pmca_info_imports_nothing_it_does_not_show() -> None:
    child = run_python(
        f"""
        import sys
        before = set(sys.modules)  # what the interpreter's site imported (a .pth file)
        import contextlib, io
        from pmca.cli import main
        with contextlib.redirect_stdout(io.StringIO()) as out:
            code = main(["info"])
        assert code == 0 and "MCA memory" in out.getvalue(), (code, out.getvalue())
        print(sorted(name for name in {UNNEEDED!r} if name in set(sys.modules) - before))
        """,
        env={"PMCA_INFO_CACHE": "none"},
        threaded=False,
        faulthandler=False,
    )
    assert child.returncode == 0, child.stderr
    assert child.stdout.splitlines() == ["[]"]


def test_records_of_the_logging_destination_still_reach_stderr() -> None:
    """The command line attaches its handler when pmca first hands ``logging`` a record."""
    child = run_python(
        """
        import sys
        from pmca.cli import _cli_logging
        from pmca.mca._logging import framework_logger
        with _cli_logging():
            print("logging" in sys.modules)
            framework_logger("demo", 100, "logging").debug("hello from demo")
        import logging
        print(logging.getLogger("pmca").handlers)
        """,
        threaded=False,
        faulthandler=False,
    )
    assert child.returncode == 0, child.stderr
    assert child.stdout.splitlines() == ["False", "[]"]  # handler gone after the run
    assert "[pmca.demo] DEBUG:" in child.stderr and "hello from demo" in child.stderr


def test_help_is_wrapped_at_columns_without_shutil() -> None:
    child = run_python(
        """
        import sys
        from pmca.cli import main
        main(["info", "--help"])
        """,
        env={"COLUMNS": "50"},
        threaded=False,
        faulthandler=False,
    )
    assert child.returncode == 0, child.stderr
    lines = child.stdout.splitlines()
    assert lines[0].startswith("usage: pmca info")
    # The options' help is wrapped at COLUMNS (the description and epilog are
    # raw text, an option's own spelling is never broken).
    helps = [line for line in lines if line.startswith(" " * 20) and line.strip()]
    assert len(helps) > 20
    assert max(map(len, helps)) <= 50, max(helps, key=len)


def test_pmca_info_as_a_program_collects_no_cycles_and_freezes_what_it_leaves() -> None:
    """Run as a program, ``pmca info`` turns the cycle collector off for its run
    (everything it allocates lives until exit) and freezes what is left, so the
    shutdown collections skip it; the collector is on again for ``atexit``.
    In-process callers (tests, embedding) keep the collector as it was."""
    child = run_python(
        """
        import atexit, gc, sys
        from pmca.cli import main
        seen = []
        gc.callbacks.append(lambda phase, info: seen.append(info["generation"]))
        sys.argv = ["pmca", "info"]
        code = main()
        print(code, gc.isenabled(), gc.get_freeze_count() > 0, seen.count(2), file=sys.stderr)
        gc.unfreeze()
        main(["info"])  # in-process: the collector runs as it would anyway
        print(gc.isenabled(), gc.get_freeze_count(), file=sys.stderr)
        """,
        env={"PMCA_INFO_CACHE": "none"},
        threaded=False,
        faulthandler=False,
    )
    assert child.returncode == 0, child.stderr
    assert child.stderr.splitlines()[-2:] == ["0 True True 0", "True 0"], child.stderr
