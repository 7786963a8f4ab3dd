"""The documentation's sources: references into it resolve, and the parameter page is complete.

The site itself is built (warnings as errors) by ``make docs`` and the tox
environment ``docs``; these tests need only the checkout.
"""

from __future__ import annotations

import importlib.util
import re
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

import pmca

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: "docs/architecture.md, section 4" or "section 5.1" (a line break may split it).
REFERENCE = re.compile(r"docs/architecture\.md,\s+(?:\*\s+)?section\s+(\d+(?:\.\d+)?)")

pytestmark = pytest.mark.skipif(not DOCS.is_dir(), reason="needs the source checkout (docs/)")


def project_files() -> list[Path]:
    found: list[Path] = []
    for top in ("src", "tests", "plugins", "examples", "benchmarks"):
        for path in (ROOT / top).rglob("*"):
            parts = path.relative_to(ROOT).parts
            # not a build, nor what `make bench` installs under benchmarks/.work and .venvs
            hidden = "build" in parts or any(part.startswith(".") for part in parts)
            if path.suffix in (".py", ".c", ".h", ".md") and not hidden:
                found.append(path)
    return [*found, ROOT / "README.md", ROOT / "CHANGELOG.md"]


def architecture_sections() -> set[str]:
    text = (DOCS / "architecture.md").read_text()
    return set(re.findall(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", text, flags=re.MULTILINE))


def test_every_architecture_reference_names_an_existing_section():
    sections = architecture_sections()
    assert {"1", "4", "5.1", "5.4"} <= sections
    references = {
        (path.relative_to(ROOT), number)
        for path in project_files()
        for number in REFERENCE.findall(path.read_text(errors="replace"))
    }
    assert references, "the code refers to the architecture document"
    dangling = sorted((str(path), number) for path, number in references if number not in sections)
    assert dangling == []


def test_no_file_cites_an_architecture_document_the_project_does_not_have():
    here = Path(__file__).resolve()
    citing = [
        str(path.relative_to(ROOT))
        for path in project_files()
        if path != here and "ARCHITECTURE" in path.read_text(errors="replace")
    ]
    assert citing == []


def python_blocks(page: Path) -> list[str]:
    """The ```python blocks of a documentation page, in order."""
    found = re.findall(
        r"^( *)```python\n(.*?)^\1```$", page.read_text(), flags=re.MULTILINE | re.DOTALL
    )
    return [textwrap.dedent(block) for _indent, block in found]


def test_every_python_example_in_the_documentation_is_valid_python():
    pages = sorted(DOCS.rglob("*.md"))
    blocks = [(page, block) for page in pages for block in python_blocks(page)]
    assert len(blocks) >= 12
    for page, block in blocks:
        compile(block, str(page.relative_to(ROOT)), "exec")


def load_extension(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, DOCS / "_ext" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_parameter_page_lists_every_parameter_of_pmca_and_no_third_party_one():
    params = load_extension("pmca_params")
    info = params.pmca_info()
    page = params.render(info)
    own = [p["name"] for p in info["core_params"]]
    foreign = []
    for framework in info["frameworks"]:
        builtin = framework["location"].startswith("built-in")
        for param in framework["params"]:
            (own if builtin else foreign).append(param["name"])
        for component in framework["components"]:
            names = [p["name"] for p in component["params"]]
            (own if builtin and component["distribution"] is None else foreign).extend(names)
    assert len(own) > 50
    missing = [name for name in own if f"| `{name}` |" not in page]
    assert missing == []
    shown = [name for name in foreign if f"`{name}`" in page]
    assert shown == []


def test_pvar_page_lists_every_pvar_and_event_type():
    params = load_extension("pmca_params")
    info = params.pmca_info("--pvars")
    page = params.render_pvars(info)
    pvars = [p["name"] for p in info["pvars"]]
    events = [e["name"] for e in info["events"]]
    assert len(pvars) > 30 and "rcache_grdma_eviction" in events
    missing = [name for name in [*pvars, *events] if f"| {params._code(name)} |" not in page]
    assert missing == []
    eviction = next(e for e in info["events"] if e["name"] == "rcache_grdma_eviction")
    assert ", ".join(f"`{f}`" for f in eviction["fields"]) in page


def test_parameter_page_escapes_what_markdown_would_swallow():
    params = load_extension("pmca_params")
    row = params.render(
        {
            "pmca": {"version": "0"},
            "core_params": [
                {
                    "name": "x_y",
                    "help": "Use <none> or a|b",
                    "value": "a|b",
                    "type": "string",
                    "level": 1,
                    "level_name": "user/basic",
                    "valid_values": "any string",
                    "synonyms": [],
                    "settable": False,
                    "internal": False,
                    "informational": False,
                    "deprecated": False,
                }
            ],
            "frameworks": [],
        }
    )
    assert r"| `x_y` | string | `a\|b` | 1 (user/basic) | Use \<none\> or a\|b. |" in row


def test_component_guide_example_is_a_working_component(install_plugin):
    (component, *_) = python_blocks(DOCS / "guides" / "component.md")
    install_plugin(
        "guide-fast",
        entry_points={"pmca.rcache": {"fast": "guide_fast:FastComponent"}},
        modules={"guide_fast": component},
    )
    with pmca.Session(frameworks=["rcache"], mca={"rcache": "fast"}) as s:
        assert [c.name for c in s.components("rcache")] == ["fast"]
        assert [m.depth for m in s.modules("rcache")] == [4]
        assert s.param("rcache_fast_depth").value == 4


def test_framework_guide_examples_work_together(install_plugin, unique):
    # A name of its own: the example's "greet" is also the bundled example's.
    fw = unique("guide")
    declaration, usage, base, *_guide_rest = (
        block.replace("greet", fw) for block in python_blocks(DOCS / "guides" / "framework.md")
    )
    component = f"""
        import pmca

        class Module:
            pass

        class Hello(pmca.Component):
            framework = {fw!r}
            name = "hello"

            @pmca.hookimpl
            def query(self, ctx):
                return pmca.Query(priority=10, module=Module())

            @pmca.hookimpl
            def {fw}ing_styles(self):
                return ["plain"]

            @pmca.hookimpl
            def preferred_style(self):
                return "plain"
        """
    install_plugin(
        f"pmca-{fw}",
        entry_points={
            "pmca.frameworks": {fw: f"pmca_{fw}:FRAMEWORK"},
            f"pmca.{fw}": {"hello": f"pmca_{fw}_hello:Hello"},
        },
        modules={
            f"pmca_{fw}.__init__": declaration,
            f"pmca_{fw}._base": base,
            f"pmca_{fw}_hello": component,
        },
    )
    exec(compile(usage, "framework.md", "exec"), {"pmca": pmca})
    with pmca.Session(frameworks=[fw]) as s:
        handle = s.framework(fw)
        assert getattr(handle.hook, f"{fw}ing_styles")() == [["plain"]]
        assert handle.hook.preferred_style() == "plain"
        assert s.param(f"{fw}_base_punctuation").value == "!"
        assert s.failures(fw) == []
