"""``.. pmca-module:: NAME``: one public package of pmca, documented from its ``__all__``.

autodoc's ``automodule`` documents the constants of a package that have a
doc comment (``#:``) where they are defined; this directive lists the
others (type aliases, re-exported values) with their value. A class or
function that ``pmca`` itself exports (``Session``, ``Component``...) is
documented there only, so each has one entry.

autodoc reads attribute doc comments from the module a class names as its
``__module__``; for a class defined in a private module but naming its
public package (``pmca.mca`` for ``pmca.mca._framework.FrameworkBase``),
:func:`_analyzer_with_private_modules` gives it the package's private
modules too. A bare name in a signature (``Version``, a private type of the
defining module) is resolved to the public entry of the pmca class it
names, or shown as plain text, and so is any private name (``_probe``);
a public name nothing documents is still a broken reference.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import pkgutil
import sys
from pathlib import Path
from typing import Any, ClassVar

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.addnodes import pending_xref
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from sphinx.errors import PycodeError
from sphinx.pycode import ModuleAnalyzer
from sphinx.util.docutils import SphinxDirective, switch_source_input
from sphinx.util.nodes import make_refnode


def _is_data(value: object) -> bool:
    return not (inspect.isclass(value) or inspect.isroutine(value) or inspect.ismodule(value))


def module_lines(name: str) -> list[str]:
    """The reStructuredText that documents package ``name``."""
    module = importlib.import_module(name)
    public: list[str] = list(getattr(module, "__all__", []))
    top = importlib.import_module("pmca")
    if name == "pmca":
        excluded = [item for item in public if inspect.ismodule(getattr(module, item))]
    else:
        # Classes and functions; a constant is listed in its package too.
        excluded = [
            item
            for item in public
            if item in top.__all__
            and getattr(top, item) is getattr(module, item)
            and not _is_data(getattr(module, item))
        ]
    lines = [f".. automodule:: {name}"]
    if excluded:
        lines.append(f"   :exclude-members: {', '.join(excluded)}")
    lines.append("")
    # Constants with a doc comment (``#:``) are documented by automodule.
    commented = {key[1] for key in ModuleAnalyzer.for_module(name).find_attr_docs() if not key[0]}
    for item in public:
        if item in excluded or item.startswith("__") or item in commented:
            continue
        value = getattr(module, item)
        if _is_data(value):
            # Not autodata: it would show the docstring of the value's class.
            lines += [f".. py:data:: {item}", f"   :module: {name}"]
            if isinstance(value, (int, str, float)) and len(repr(value)) < 60:
                lines.append(f"   :value: {value!r}")
            lines.append("")
    return lines


class PmcaModule(SphinxDirective):
    required_arguments = 1
    has_content = False
    option_spec: ClassVar[dict[str, Any]] = {}

    def run(self) -> list[nodes.Node]:
        lines = StringList(
            module_lines(self.arguments[0]), source=f"<pmca-module {self.arguments[0]}>"
        )
        container = nodes.section()
        container.document = self.state.document
        with switch_source_input(self.state, lines):
            self.state.nested_parse(lines, 0, container)
        return list(container.children)


_FOR_MODULE = ModuleAnalyzer.for_module


def _is_public_package(name: str) -> bool:
    if name.split(".")[0] != "pmca" or any(part.startswith("_") for part in name.split(".")):
        return False
    return hasattr(sys.modules.get(name), "__path__")


def _analyzer_with_private_modules(cls: type[ModuleAnalyzer], modname: str) -> ModuleAnalyzer:
    """``modname``'s analyzer, with the attribute comments of its private modules."""
    analyzer: ModuleAnalyzer = _FOR_MODULE(modname)
    if not _is_public_package(modname) or getattr(analyzer, "_pmca_merged", False):
        return analyzer
    analyzer.analyze()
    package = sys.modules[modname]
    for info in pkgutil.iter_modules(package.__path__):
        # Private modules only: never __main__ (reading a module may import it).
        if not info.name.startswith("_") or info.name.startswith("__"):
            continue
        try:
            part = _FOR_MODULE(f"{modname}.{info.name}")
            part.analyze()
        except PycodeError:
            continue
        for key, lines in part.attr_docs.items():
            analyzer.attr_docs.setdefault(key, lines)
        for key, annotation in part.annotations.items():
            analyzer.annotations.setdefault(key, annotation)
        for key, order in part.tagorder.items():
            analyzer.tagorder.setdefault(key, order)
    analyzer._pmca_merged = True  # type: ignore[attr-defined]
    return analyzer


@functools.cache
def _pmca_top_level_names() -> frozenset[str]:
    """pmca's module names, and every class, function and assignment at their top level."""
    import pmca

    names: set[str] = set()
    for path in Path(pmca.__file__).parent.rglob("*.py"):
        names.add(path.stem)
        try:
            tree = ast.parse(path.read_text())
        except (OSError, SyntaxError):
            continue
        for statement in tree.body:
            if isinstance(statement, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                names.add(statement.name)
            elif isinstance(statement, ast.Assign):
                names.update(t.id for t in statement.targets if isinstance(t, ast.Name))
            elif isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                names.add(statement.target.id)
    return frozenset(names)


def _bare_pmca_name(
    app: Sphinx, env: BuildEnvironment, node: pending_xref, contnode: nodes.Element
) -> nodes.Node | None:
    """Resolve a bare type name from a signature to the pmca type it names."""
    target = node.get("reftarget", "")
    if node.get("refdomain") != "py":
        return None
    if any(part.startswith("_") for part in target.split(".")):
        return contnode  # a private name (``_probe``, ``Class._put``): plain text
    if node.get("reftype") != "class" or target not in _pmca_top_level_names():
        return None
    homes = sorted(
        {
            str(getattr(value, "__module__", ""))
            for module_name, module in list(sys.modules.items())
            if module_name.split(".")[0] == "pmca" and module is not None
            for value in [getattr(module, target, None)]
            if inspect.isclass(value)
        }
    )
    objects = env.get_domain("py").objects  # type: ignore[attr-defined]
    for home in [*homes, "pmca"]:
        entry = objects.get(f"{home}.{target}")
        if entry is not None:
            return make_refnode(
                app.builder, node["refdoc"], entry.docname, entry.node_id, contnode, target
            )
    return contnode  # a private pmca type or alias: plain text


def setup(app: Sphinx) -> dict[str, Any]:
    ModuleAnalyzer.for_module = classmethod(_analyzer_with_private_modules)  # type: ignore[assignment,method-assign]
    app.connect("missing-reference", _bare_pmca_name)
    app.add_directive("pmca-module", PmcaModule)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
