"""``.. pmca-module:: NAME``: one public package of pmca, documented from its ``__all__``.

autodoc's ``automodule`` documents the classes and functions a package
re-exports, but not its constants and type aliases (they have no doc
comment in the package's own ``__init__``): this directive lists each
with its value. A name that ``pmca`` itself exports (``Session``,
``Component``...) is documented there only, so every name has one entry.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any, ClassVar

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective, switch_source_input


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
        excluded = [
            item
            for item in public
            if item in top.__all__ and getattr(top, item) is getattr(module, item)
        ]
    lines = [f".. automodule:: {name}"]
    if excluded:
        lines.append(f"   :exclude-members: {', '.join(excluded)}")
    lines.append("")
    for item in public:
        if item in excluded or item.startswith("__"):
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


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("pmca-module", PmcaModule)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
