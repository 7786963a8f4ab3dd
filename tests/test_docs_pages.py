"""The README's old sections live on in the docs, and the pages' examples print what they show.

The README once was the whole manual; its sections moved to the
documentation site. ``MOVED`` maps each heading the README had to the page
that holds it now, so that none is lost. Every ``pycon`` block (``>>>``
examples) of the README and of the documentation runs as a doctest, page by
page in a fresh interpreter, and must print exactly what the page shows.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

import pmca.native
from pmca.testing import run_python

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

pytestmark = pytest.mark.skipif(not DOCS.is_dir(), reason="needs the source checkout (docs/)")

#: Every heading of the 1,441-line README, and the page under docs/ that has it now.
MOVED = {
    "pmca": "index.md",
    "Getting started": "install.md",
    "Installing": "install.md",
    "Tests: the interpreter matrix": "install.md",
    "Benchmark report": "guides/doctor.md",
    "Seed scenarios": "guides/doctor.md",
    "Using pmca": "guides/using.md",
    "Parameters": "guides/using.md",
    "Selecting components": "guides/using.md",
    "Load modes": "guides/using.md",
    "Ctrl-C, fork and exit": "guides/using.md",
    "`pmca info`'s cache": "reference/cli.md",
    "`pmca info --json`": "reference/cli.md",
    "Writing a component": "guides/component.md",
    "Writing a framework": "guides/framework.md",
    "Memory hooks": "guides/memory.md",
    "btl/ofi: libfabric": "guides/transports.md",
    "Running under mpirun": "guides/mpirun.md",
    "Matching, wildcards, probes, cancel, status": "guides/mpirun.md",
    "Running across hosts": "guides/hosts.md",
    "Trying it on one machine": "guides/hosts.md",
    "Worlds from the launcher, without MPI": "guides/mpirun.md",
    "Shared memory between processes (btl sm)": "guides/transports.md",
    "Registration cache": "guides/memory.md",
    "Inside an MPI job": "guides/memory.md",
    "Performance variables, events and the live view": "guides/pvars.md",
    "Logging": "guides/using.md",
    "Start-up and scale": "guides/doctor.md",
    "Security notes": "guides/security.md",
    "Dependencies": "install.md",
    "Layout": "install.md",
}

#: MyST's include directive: ```{include} FILE, then :start-after: / :end-before: options.
INCLUDE = re.compile(r"^```\{include\} (\S+)\n((?::[\w-]+: .*\n)*)```$", re.MULTILINE)


def page_source(page: Path) -> str:
    """A page's Markdown with what it includes put in place, as Sphinx reads it."""

    def included(match: re.Match[str]) -> str:
        text = (page.parent / match[1]).read_text()
        options = dict(re.findall(r"^:([\w-]+): (.*)$", match[2], flags=re.MULTILINE))
        if "start-after" in options:
            text = text.split(options["start-after"], 1)[1]
        if "end-before" in options:
            text = text.split(options["end-before"], 1)[0]
        return text

    return INCLUDE.sub(included, page.read_text())


def headings(text: str) -> set[str]:
    """The Markdown headings of a page, outside its code blocks."""
    outside_code = re.sub(r"^```.*?^```$", "", text, flags=re.MULTILINE | re.DOTALL)
    return {line.lstrip("#").strip() for line in re.findall(r"^#{1,6} .*$", outside_code, re.M)}


def test_every_old_readme_heading_is_a_heading_of_its_page() -> None:
    missing = [
        (heading, page)
        for heading, page in MOVED.items()
        if heading not in headings(page_source(DOCS / page))
    ]
    assert missing == []


def test_the_readme_is_short_and_points_each_reader_to_the_documentation() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    for command in ("make run", "make test", "make docs"):
        assert command in readme
    for reader in ("Component and framework authors", "MPI tool authors", "Memory-hook engineers"):
        assert reader in readme


def test_the_dependencies_are_justified_where_the_documentation_shows_them() -> None:
    text = page_source(DOCS / "install.md")
    section = text.split("## Dependencies", 1)[1].split("\n## ", 1)[0]
    for dependency in ("pluggy", "Sphinx", "MyST-Parser", "Furo", "sphinx-copybutton", "cffi"):
        assert dependency in section


def pycon_blocks(page: Path) -> list[str]:
    """The ```pycon blocks of a page: interactive examples with their output."""
    return re.findall(r"^```pycon\n(.*?)^```$", page.read_text(), flags=re.MULTILINE | re.DOTALL)


PAGES_WITH_EXAMPLES = sorted(
    path
    for path in [ROOT / "README.md", *DOCS.rglob("*.md")]
    if "_build" not in path.parts and pycon_blocks(path)
)

#: The page's examples as one doctest, typed one after the other into one interpreter.
RUNNER = """
import doctest, sys
test = doctest.DocTestParser().get_doctest(EXAMPLES, {}, PAGE, PAGE, 0)
runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
runner.run(test)
sys.exit(1 if runner.failures else 0)
"""


def test_the_tutorial_and_the_guides_have_examples_that_run() -> None:
    names = {str(path.relative_to(ROOT)) for path in PAGES_WITH_EXAMPLES}
    assert {"README.md", "docs/tutorial.md", "docs/guides/pvars.md"} <= names


#: Pages whose examples use a bundled distribution (installed by ``make install`` and tox).
NEEDS = {"docs/guides/framework.md": "pmca_hello"}


@pytest.mark.skipif(not pmca.native.available(), reason="the examples show the native hooks")
@pytest.mark.parametrize("page", PAGES_WITH_EXAMPLES, ids=lambda p: str(p.relative_to(ROOT)))
def test_examples_print_what_the_page_shows(page: Path) -> None:
    name = str(page.relative_to(ROOT))
    if name in NEEDS and importlib.util.find_spec(NEEDS[name]) is None:
        pytest.skip(f"{name}'s examples need {NEEDS[name]} (examples/pmca-hello) installed")
    examples = "\n".join(pycon_blocks(page))
    done = run_python(f"PAGE = {name!r}\nEXAMPLES = {examples!r}\n{RUNNER}", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
