"""Sphinx configuration of pmca's documentation (``make docs``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pmca

sys.path.insert(0, str(Path(__file__).parent / "_ext"))

project = "pmca"
author = "the pmca authors"
copyright = "the pmca authors"
release = pmca.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx_copybutton",
    "pmca_api",
    "pmca_params",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build", "README.md"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# A reference that does not resolve is a warning, and `make docs` makes
# warnings errors: a broken link fails the build.
nitpicky = True
# A short name in a signature that several attributes share (``type``: the
# builtin, ``Param.type``, ``PVar.type``) is not broken, only ambiguous.
suppress_warnings = ["ref.python"]

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {
    "members": True,
    "undoc-members": True,
    # What a public class inherits from pmca's private bases (P2p.send) is
    # its API; what it inherits from Python's own classes is not repeated.
    "inherited-members": ",".join(
        (
            "BaseException,Exception,object,tuple,dict,list,int,str,float",
            "Enum,IntEnum,IntFlag,Flag,Protocol,Generic,NamedTuple",
        )
    ),
}

# Furo's code blocks scroll sideways: a long line is never cut off.
html_theme = "furo"
html_title = f"pmca {release}"
html_static_path: list[str] = []
# The copy button copies what a reader types: no prompt, no output.
copybutton_prompt_text = r">>> |\.\.\. |\$ "
copybutton_prompt_is_regexp = True
copybutton_only_copy_prompt_lines = True

# The standard library and other projects are not cross-referenced (no
# inventory is fetched: the build works offline), and pmca's private types
# in signatures stay plain text; everything public must resolve.
nitpick_ignore_regex = [
    (
        r"py:.*",
        r"(os|pathlib|warnings|enum|typing|collections\.abc|threading|ctypes|subprocess"
        r"|socket|pluggy|structlog)\..*",
    ),
    (r"py:.*", r"pmca(\.\w+)*\._\w+(\.\w+)*"),
]
# Other projects' names in string annotations, which autodoc cannot qualify
# (pmca's own are resolved by the pmca_api extension).
nitpick_ignore = [
    ("py:class", "Path"),
    ("py:class", "FilteringBoundLogger"),
]
