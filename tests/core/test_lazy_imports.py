"""A session imports what the frameworks it opens need, and a framework base may be named lazily."""

from __future__ import annotations

import sys
import textwrap

import pytest

import pmca
from pmca.testing import run_python
from tests.conftest import component_source, framework_source


def test_a_session_without_btl_imports_neither_the_btl_base_nor_p2p() -> None:
    child = run_python(
        textwrap.dedent(
            """
            import sys
            import pmca
            pmca.Session(frameworks=["memory"]).init().finalize()
            heavy = ("pmca.btl.base", "pmca.p2p", "pmca.world", "socket", "importlib_metadata",
                     "email", "logging", "difflib", "tempfile", "shutil")
            print(sorted(name for name in heavy if name in sys.modules))
            with pmca.Session(frameworks=["btl"]) as session:
                home = type(session.p2p).__module__
                print(home, "pmca.p2p._engine" in sys.modules, "pmca.btl.base" in sys.modules)
            """
        )
    )
    assert child.returncode == 0, child.stderr
    assert child.stdout.splitlines() == ["[]", "pmca.p2p True True"]


def _declaration(fw: str, base: str) -> str:
    source = framework_source(fw).replace("base=Base,", f"base={base!r},")
    assert f"base={base!r}" in source
    return source


def test_a_base_named_by_a_string_is_imported_at_the_first_open(install_framework, unique) -> None:
    fw = unique("lazybase")
    decl = install_framework(
        fw, {"one": component_source(fw, "one")}, declaration=_declaration(fw, f"{fw}_decl:Base")
    )
    with pmca.Session(frameworks=[fw]):
        pass
    assert ("opened", fw) in sys.modules[decl].EVENTS
    assert ("closing", fw) in sys.modules[decl].EVENTS


@pytest.mark.parametrize("target", ["{fw}_decl:EVENTS", "{fw}_decl:NoSuchBase"])
def test_a_base_string_naming_no_framework_base_fails_the_open(
    install_framework, unique, target
) -> None:
    fw = unique("badbase")
    install_framework(
        fw,
        {"one": component_source(fw, "one")},
        declaration=_declaration(fw, target.format(fw=fw)),
    )
    with pytest.raises(pmca.FrameworkError, match=f"framework {fw!r}: .*base '{fw}_decl:"):
        pmca.Session(frameworks=[fw]).init()
