"""Generate the reference pages of pmca's own MCA parameters, pvars and events at build time.

The parameter page is written from ``pmca info --json --all --internal``,
run in a fresh interpreter with no ``PMCA_MCA_*`` variable and no parameter
file, so it shows every parameter of pmca's built-in frameworks and
components with its default, the way Open MPI's documentation lists its MCA
variables. Third-party frameworks and components installed next to pmca are
left out. The performance variable page is written the same way from
``pmca info --pvars --all --json``: every pvar, then every event type.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sphinx.application import Sphinx

#: Where the pages go, relative to the documentation's source directory.
PAGE = Path("reference") / "parameters.md"
PVARS_PAGE = Path("reference") / "pvars.md"

#: Markdown characters that would change the meaning of help text.
_SPECIAL = "\\`*_[]<>|{}#"


def _escape(text: str) -> str:
    return "".join(f"\\{char}" if char in _SPECIAL else char for char in text)


def _portable(text: str) -> str:
    """``text`` with this machine's prefix and home directory in their generic form."""
    home = os.path.expanduser("~")
    text = text.replace(sys.prefix, "<sys.prefix>")
    return text.replace(home, "~") if home not in ("", "/") else text


def _code(text: str) -> str:
    if not text:
        return "(empty)"
    text = _portable(text)
    return "`" + text.replace("|", "\\|") + "`"


def pmca_info(*options: str) -> dict[str, Any]:
    """``pmca info --json --all`` and ``options`` (default ``--internal``), run afresh."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PMCA_")}
    env["PMCA_MCA_mca_base_param_files"] = ""
    env["PMCA_INFO_CACHE"] = "none"
    command = [sys.executable, "-m", "pmca.cli", "info", "--json", "--all"]
    command += list(options or ("--internal",))
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[1:])} failed ({done.returncode}): {done.stderr}")
    info: dict[str, Any] = json.loads(done.stdout)
    return info


def _table(params: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| parameter | type | default | level | description |",
        "|---|---|---|---|---|",
    ]
    for param in params:
        help_text = param["help"].rstrip()
        notes = [_escape(help_text if help_text.endswith((".", ")")) else f"{help_text}.")]
        if param["valid_values"] and param["valid_values"] != "any string":
            notes.append(f"Valid values: {_escape(param['valid_values'])}.")
        for synonym in param["synonyms"]:
            kind = "deprecated synonym" if synonym["deprecated"] else "synonym"
            notes.append(f"{kind.capitalize()}: {_code(synonym['name'])}.")
        flags = [
            word
            for word, on in (
                ("settable", param["settable"]),
                ("internal", param["internal"]),
                ("informational", param["informational"]),
                ("deprecated", param["deprecated"]),
            )
            if on
        ]
        if flags:
            notes.append(f"({', '.join(flags)})")
        lines.append(
            f"| {_code(param['name'])} | {param['type']} | {_code(param['value'])} "
            f"| {param['level']} ({param['level_name']}) | {' '.join(notes)} |"
        )
    return lines


def render(info: dict[str, Any]) -> str:
    """The Markdown page for one ``pmca info --json`` document."""
    out = [
        "# MCA parameters",
        "",
        "Every parameter of pmca's own frameworks and components, with its default",
        f"(pmca {info['pmca']['version']}, generated from `pmca info --json --all --internal`",
        "while the documentation was built). Defaults that depend on the machine",
        "(a path, an interface list) show what the build machine computed;",
        "`pmca info --param FRAMEWORK COMPONENT --level 9` shows yours, with the",
        "source of every value. The {doc}`parameters guide </guides/parameters>`",
        "explains types, levels, sources and files.",
        "",
        "## Core parameters",
        "",
        *_table(info["core_params"]),
        "",
    ]
    for framework in info["frameworks"]:
        if not framework["location"].startswith("built-in"):
            continue
        out += [
            f"## {framework['name']}",
            "",
            f"{_escape(framework['description'])} (policy `{framework['policy']}`,"
            f" API {framework['api_version']}).",
            "",
            "### Framework parameters",
            "",
            *_table(framework["params"]),
            "",
        ]
        for component in framework["components"]:
            if component["distribution"] is not None or not component["params"]:
                continue
            out += [
                f"### {framework['name']}/{component['name']}",
                "",
                *_table(component["params"]),
                "",
            ]
    return "\n".join(out)


def _sentence(text: str) -> str:
    text = text.rstrip()
    return _escape(text if text.endswith((".", ")")) else f"{text}.")


def render_pvars(info: dict[str, Any]) -> str:
    """The Markdown page for one ``pmca info --pvars --all --json`` document."""
    out = [
        "# Performance variables and events",
        "",
        "Every performance variable and event type pmca declares (generated from",
        "`pmca info --pvars --all --json` while the documentation was built;",
        "`pmca info --pvars --all` shows the same on any installation, with the",
        "pvars of installed third-party components too). Names are",
        "`<framework>_<component>_<name>`; a pvar bound per peer, cache or module",
        "takes the object as `obj` in `ps.handle(name, obj)`.",
        "",
        "## Performance variables",
        "",
        "| pvar | class | unit | level | binding | flags | description |",
        "|---|---|---|---|---|---|---|",
    ]
    for pvar in info["pvars"]:
        out.append(
            f"| {_code(pvar['name'])} | {pvar['class']} | {_escape(pvar['unit']) or '-'} "
            f"| {pvar['level']} | {pvar['binding']} | {', '.join(pvar['flags']) or '-'} "
            f"| {_sentence(pvar['description'])} |"
        )
    out += [
        "",
        "## Events",
        "",
        "`s.register_event(name, callback, safety)` calls `callback(name, fields)`",
        "with these fields.",
        "",
        "| event | fields | level | description |",
        "|---|---|---|---|",
    ]
    for event in info.get("events", []):
        fields = ", ".join(_code(field) for field in event["fields"])
        out.append(
            f"| {_code(event['name'])} | {fields} | {event['level']} "
            f"| {_sentence(event['description'])} |"
        )
    return "\n".join([*out, ""])


def _write(page: Path, text: str) -> None:
    # Rewritten only when it changes, so an incremental build stays incremental.
    if not page.exists() or page.read_text() != text:
        page.write_text(text)


def _generate(app: Sphinx) -> None:
    _write(Path(app.srcdir) / PAGE, render(pmca_info()))
    _write(Path(app.srcdir) / PVARS_PAGE, render_pvars(pmca_info("--pvars")))


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("builder-inited", _generate)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
