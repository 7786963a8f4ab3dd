"""``pmca new``: write a new component or framework distribution, ready to test.

``pmca new component FRAMEWORK NAME`` writes ``pmca-FRAMEWORK-NAME/`` and
``pmca new framework NAME`` writes ``pmca-NAME/`` (with a first component,
``basic``), each into ``--into DIR`` (default: the current directory): a
``pyproject.toml`` with the entry points, the code with a parameter or two,
tests using pmca's pytest plugin, a ``tox.ini`` with the ``static`` and
``dso`` factors and a README. The result installs and passes its own tests.

pmca is not on a package index, so the generated ``tox.ini`` takes pmca
from where the pmca that generated it was installed from (the wheel or the
source directory pip recorded, PEP 610) while that is still there, and
from the index only for a pmca that came from one.
"""

from __future__ import annotations

import json
import platform
import re
from collections.abc import Mapping
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

from .._version import __version__
from ..mca._names import COMPONENT_NAME, FRAMEWORK_NAME
from . import _templates, _templates_btl
from ._errors import UsageError

if TYPE_CHECKING:
    import argparse

__all__ = ["add_arguments", "run"]

#: pmca's own frameworks: a new framework may not take their names.
BUILTIN_FRAMEWORKS = ("patcher", "memory", "rcache", "btl")
#: The first component of a new framework.
FIRST_COMPONENT = "basic"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    kinds = parser.add_subparsers(dest="kind", metavar="KIND", required=True)
    component = kinds.add_parser(
        "component",
        help="a component for an installed framework",
        description="Write pmca-FRAMEWORK-NAME/: a component distribution with tests and tox.",
    )
    component.add_argument("framework", metavar="FRAMEWORK", help="the framework it plugs into")
    component.add_argument("name", metavar="NAME", help="the component name ([a-z][a-z0-9_]*)")
    framework = kinds.add_parser(
        "framework",
        help="a new framework with a first component",
        description="Write pmca-NAME/: a framework distribution with tests and tox.",
    )
    framework.add_argument("name", metavar="NAME", help="the framework name ([a-z][a-z0-9]*)")
    for sub in (component, framework):
        sub.add_argument(
            "--into",
            metavar="DIR",
            default=".",
            help="the directory to write the distribution's directory into (default: .)",
        )
        sub.set_defaults(prog=sub.prog)


def run(args: argparse.Namespace) -> int:
    into = Path(args.into)
    if args.kind == "component":
        framework = _checked(args.framework, "FRAMEWORK", FRAMEWORK_NAME, "[a-z][a-z0-9]*")
        name = _checked(args.name, "NAME", COMPONENT_NAME, "[a-z][a-z0-9_]*")
        target = write_component(framework, name, into)
    else:
        name = _checked(args.name, "NAME", FRAMEWORK_NAME, "[a-z][a-z0-9]* (no '_')")
        if name in BUILTIN_FRAMEWORKS:
            raise UsageError(f"NAME {name!r} is one of pmca's own frameworks; choose another name")
        target = write_framework(name, into)
    print(f"wrote {target}")
    print(f"test it: cd {target} && tox   (PMCA_SPEC=<pmca wheel or checkout> to use another pmca)")
    return 0


def _checked(value: str, argument: str, pattern: re.Pattern[str], shape: str) -> str:
    if not pattern.fullmatch(value):
        raise UsageError(f"{argument} {value!r} is not a valid name: it must match {shape}")
    return value


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def _requirement() -> str:
    """The pmca requirement of a generated distribution: this pmca or later."""
    return f"pmca>={__version__}"


def _installed_from() -> Path | None:
    """The wheel or source directory this pmca was installed from, if pip
    recorded one (``direct_url.json``) and it is still there."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        record = json.loads(distribution("pmca").read_text("direct_url.json") or "null")
    except (PackageNotFoundError, ValueError):
        return None
    if not isinstance(record, dict):
        return None
    url = urlparse(str(record.get("url", "")))
    if url.scheme != "file":
        return None
    path = Path(unquote(url.path))
    if "dir_info" in record and any((path / f).is_file() for f in ("pyproject.toml", "setup.py")):
        return path
    if "archive_info" in record and path.is_file():
        return path
    return None


def _pmca_source() -> dict[str, str]:
    """Where the generated tox.ini takes pmca from, and how its comment and README say so."""
    source = _installed_from()
    if source is None:
        return {
            "pmca_spec": _requirement(),
            "pmca_from": "the package index",
            "pmca_readme": f"tox installs `{_requirement()}` from the package index.",
        }
    kind = "source directory" if source.is_dir() else "wheel"
    return {
        "pmca_spec": str(source),
        "pmca_from": f"the {kind} that the generating pmca was installed from",
        "pmca_readme": (
            f"pmca is not on the package index: tox installs it from `{source}`, the"
            f" {kind} that the pmca which generated this distribution (pmca"
            f" {__version__}) was installed from (`pmca new` wrote that path into"
            " `tox.ini`; edit it there if it moves)."
        ),
    }


def _framework_source(framework: str) -> tuple[str, str | None]:
    """The API version of installed framework ``framework`` and its distribution's requirement.

    ``None`` for pmca's own frameworks, which come with pmca.
    """
    if framework in BUILTIN_FRAMEWORKS:
        import importlib

        declaration = importlib.import_module(f"pmca.{framework}").FRAMEWORK
        return str(declaration.api_version), None
    from importlib.metadata import entry_points

    found = [point for point in entry_points(group="pmca.frameworks") if point.name == framework]
    if not found:
        installed = sorted(
            {*BUILTIN_FRAMEWORKS, *(point.name for point in entry_points(group="pmca.frameworks"))}
        )
        raise UsageError(
            f"FRAMEWORK {framework!r} is not installed here (installed: {', '.join(installed)});"
            " install the distribution that declares it first"
        )
    point = found[0]
    try:
        declaration = point.load()
        api_version = str(declaration.api_version)
    except Exception as exc:
        raise UsageError(
            f"FRAMEWORK {framework!r}: its declaration {point.value!r} cannot be loaded: {exc}"
        ) from exc
    dist = point.dist
    requirement = f"{dist.name}>={dist.version}" if dist is not None else None
    return api_version, requirement


def write_component(framework: str, name: str, into: Path) -> Path:
    """Write the distribution of component ``framework/name`` into ``into``; its directory."""
    api_version, framework_requirement = _framework_source(framework)
    distribution = f"pmca-{framework}-{name.replace('_', '-')}"
    package = f"pmca_{framework}_{name}"
    full = f"{framework}_{name}"
    # A btl session needs btl/self to reach its own process.
    selection = f"self,{name}" if framework == "btl" else name
    values = {
        "distribution": distribution,
        "package": package,
        "framework": framework,
        "name": name,
        "api_version": api_version,
        "component_class": f"{_camel(name)}Component",
        "module_class": f"{_camel(name)}Module",
        "selection": selection,
        "summary": f"The {name} component of pmca's {framework} framework",
        "tested": f"the {framework}/{name} component",
        "what": (
            f"A component for pmca's `{framework}` framework, found through the entry"
            f" point `{name}` in the group `pmca.{framework}`. Select it with"
            f" `PMCA_MCA_{framework}={selection}` (or `^{name}` to exclude it)."
        ),
        "parameters": (
            f"- `{full}_priority` (int, 5): selection priority; pmca's own components"
            " have higher ones, so raise it for this component to win a default"
            " selection.\n"
            f"- `{full}_label` (string, `{name}`): the label its module reports."
        ),
        "param_scope": f"{framework} {name}",
        "entry_points": f'[project.entry-points."pmca.{framework}"]\n{name} = "{package}:'
        f'{_camel(name)}Component"\n',
        "dependencies": _dependencies(framework_requirement),
    }
    files = {**_templates.SHARED_FILES, **_templates.COMPONENT_FILES}
    if framework == "btl":
        values["what"] += (
            " As written it is a loopback that reaches only its own process, like"
            " pmca's btl/self: a working btl to turn into a transport."
        )
        values["parameters"] = _templates_btl.btl_parameters(name)
        files.update(
            _templates_btl.btl_files(
                _templates.COMPONENT_CLASS_HEAD,
                _templates.TESTS_HEADER,
                _templates.COMPONENT_TESTS_COMMON,
            )
        )
    return _write(into / distribution, files, values)


def write_framework(name: str, into: Path) -> Path:
    """Write the distribution of a new framework ``name`` into ``into``; its directory."""
    distribution = f"pmca-{name}"
    package = f"pmca_{name}"
    component = FIRST_COMPONENT
    values = {
        "distribution": distribution,
        "package": package,
        "name": name,
        "component": component,
        "spec_class": f"{_camel(name)}Spec",
        "base_class": f"{_camel(name)}Base",
        "component_class": f"{_camel(component)}Component",
        "module_class": f"{_camel(component)}Module",
        "summary": f"The {name} framework for pmca, with its first component, {component}",
        "tested": f"the {name} framework",
        "what": (
            f"A pmca framework, `{name}`, declared through the entry point `{name}` in"
            f" the group `pmca.frameworks`; its components are found in the group"
            f" `pmca.{name}` (this distribution ships `{component}`). Use it with"
            f' `pmca.Session(frameworks=["{name}"])` and'
            f' `session.framework("{name}").hook.features()`.'
        ),
        "parameters": (
            f"- `{name}` : the selection parameter (`{component}`, `^{component}`).\n"
            f"- `{name}_base_limit` (int, 8): a parameter of the framework's base.\n"
            f"- `{name}_{component}_priority` (int, 10): selection priority.\n"
            f"- `{name}_{component}_feature` (string, `{component}`): what it offers."
        ),
        "param_scope": f"{name} all",
        "entry_points": (
            f'[project.entry-points."pmca.frameworks"]\n{name} = "{package}:FRAMEWORK"\n\n'
            f'[project.entry-points."pmca.{name}"]\n'
            f'{component} = "{package}.{component}:{_camel(component)}Component"\n'
        ),
        "dependencies": _dependencies(None),
    }
    files = {**_templates.SHARED_FILES, **_templates.FRAMEWORK_FILES}
    return _write(into / distribution, files, values)


def _dependencies(extra: str | None) -> str:
    items = [_requirement(), *([extra] if extra else [])]
    return ", ".join(f'"{item}"' for item in items)


def _write(target: Path, files: Mapping[str, Template], values: Mapping[str, str]) -> Path:
    machine = platform.machine()
    values = {
        **values,
        **_pmca_source(),
        "requirement": _requirement(),
        "version": __version__,
        # The name of pmca's wheel as its `make wheel` writes it.
        "wheel_name": (
            f"pmca-{__version__}-py3-none-manylinux2014_{machine}.manylinux_2_17_{machine}.whl"
        ),
    }
    if target.exists():
        raise UsageError(f"{target} already exists: remove it or choose another --into")
    if target.parent.exists() and not target.parent.is_dir():
        raise UsageError(f"--into {target.parent}: not a directory")
    rendered = {
        Template(path).substitute(values): template.substitute(values)
        for path, template in files.items()
    }
    try:
        target.mkdir(parents=True)
        for path, text in rendered.items():
            file = target / path
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_text(text)
    except OSError as exc:
        raise UsageError(f"cannot write {target}: {exc.strerror or exc}") from exc
    return target
