"""``pmca info``: Open MPI's ``ompi_info`` for pmca.

Without options it prints a header and one line per component, like
``ompi_info``; ``--param FW COMP``/``--all`` add parameters up to ``--level``;
``--parsable`` and ``--json`` are for machines. Unlike ``ompi_info`` 4.1,
``--mca k v`` changes what is shown: the values are given to the session
with the priority of the command line.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import warnings
from collections.abc import Iterator, Sequence
from typing import TextIO

from attrs import evolve

from ..mca.params import (
    OVERRIDE_FILE,
    PARAM_FILES,
    InfoLevel,
    ParamSpace,
    ParamType,
    ParamWarning,
    UnknownParamError,
    expand_home,
)
from ..runtime import RUNTIME, FrameworkEntry, inventory
from ..runtime._unknown import Namespace, unknown_name_messages
from ..session import Session
from ._errors import UsageError
from ._help import RawDescriptionHelpFormatter
from ._info_cache import Recorder
from ._model import (
    ALL,
    PATHS,
    Fact,
    ParamFilter,
    Report,
    Selector,
    arch_fact,
    config_facts,
    hostname_fact,
    path_facts,
)
from ._text import Parsable, Readable, View, render

_LEVELS = ", ".join(f"{int(level)} {level.label}" for level in InfoLevel)
TYPE_NAMES = tuple(ptype.type_name for ptype in ParamType)

DESCRIPTION = """\
Show the installed frameworks and components (version, framework API, load
mode, where each came from), their parameters with value and data source, and
the components that failed to load and why: pmca's ompi_info.
"""

EPILOG = f"""\
levels: {_LEVELS}

examples:
  pmca info                          components, like ompi_info
  pmca info --param memory all -l 9  every memory parameter
  pmca info --all --parsable         everything, one record per line
  pmca info --json                   everything as JSON (schema "pmca-info" v1, see the docs)
  pmca info -t bool -l 9             every boolean parameter
  pmca info --path all --arch        where pmca lives, what it runs on
  pmca info --tcp-interfaces         the interfaces btl/tcp would use, and why
  pmca info --mca memory ^none --param memory all
  pmca info --pvars --json           every performance variable as JSON
  pmca info --check btl              open and query each btl on its own
"""


def _level(text: str) -> int:
    try:
        level = int(text)
    except ValueError:
        level = 0
    if not 1 <= level <= 9:
        raise argparse.ArgumentTypeError(
            f"invalid level {text!r}: valid levels are 1-9 ({_LEVELS})"
        )
    return level


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``pmca info``, named as ``ompi_info`` names them."""
    parser.description = DESCRIPTION
    parser.epilog = EPILOG
    parser.formatter_class = RawDescriptionHelpFormatter
    parser.add_argument(
        "--param",
        "--params",
        nargs=2,
        action="append",
        default=[],
        metavar=("FRAMEWORK", "COMPONENT"),
        help="show the parameters of FRAMEWORK (or 'all', or 'mca' for pmca's own) "
        "and COMPONENT (or 'all', or 'base' for framework-level ones); repeatable",
    )
    parser.add_argument(
        "-l",
        "--level",
        type=_level,
        default=None,
        metavar="N",
        help="show parameters of level 1..N only (default: 1, or 9 with --all/--json)",
    )
    parser.add_argument(
        "-a", "--all", action="store_true", help="show everything, parameters up to level 9"
    )
    style = parser.add_mutually_exclusive_group()
    style.add_argument("--pretty-print", action="store_true", help="readable output (the default)")
    style.add_argument(
        "--parsable",
        "--parseable",
        action="store_true",
        help="machine-parsable 'mca:<fw>:<comp>:...' lines, as ompi_info --parsable",
    )
    style.add_argument(
        "--json",
        action="store_true",
        help=(
            "one JSON document, schema 'pmca-info' v1 (documentation: Command line,"
            " section 'pmca info --json')"
        ),
    )
    parser.add_argument(
        "--mca",
        "-mca",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUE"),
        help="set MCA parameter NAME to VALUE (data source 'command line'); repeatable",
    )
    parser.add_argument(
        "--show-failed",
        action="store_true",
        help="show the components that failed to load (import, validation, register), "
        "where they came from and why; open and query are not run: see --check",
    )
    parser.add_argument(
        "--check",
        nargs="?",
        const="",
        default=None,
        metavar="FRAMEWORK[/COMPONENT]",
        help="open and query each component (of FRAMEWORK, or COMPONENT only; default: "
        "all) in a session of its own and report it available, declined or failed with "
        "why; exit status 1 if any failed",
    )
    parser.add_argument(
        "-s",
        "--selected-only",
        action="store_true",
        help="leave out components excluded by their framework's selection parameter",
    )
    parser.add_argument("--internal", action="store_true", help="also show internal parameters")
    parser.add_argument(
        "-t",
        "--type",
        action="append",
        default=[],
        choices=TYPE_NAMES,
        metavar="TYPE",
        help=f"show the parameters of this type only ({', '.join(TYPE_NAMES)}); repeatable",
    )
    parser.add_argument(
        "--path",
        choices=(ALL, *PATHS),
        metavar="NAME",
        help=f"show a path pmca uses: {', '.join(PATHS)} or all",
    )
    parser.add_argument(
        "--isolate",
        action="store_true",
        help="import each third-party component in a child process first: one whose "
        "import crashes is reported by name and distribution instead of crashing pmca info",
    )
    parser.add_argument("--arch", action="store_true", help="show the architecture")
    parser.add_argument(
        "-c", "--config", action="store_true", help="show how pmca was built and what it runs on"
    )
    parser.add_argument("--hostname", action="store_true", help="show the host name")
    parser.add_argument(
        "--tcp-interfaces",
        action="store_true",
        help="show which interfaces btl/tcp would use (with each one's bandwidth and "
        "latency and where they come from) and why the others are left out",
    )
    parser.add_argument(
        "--pvars",
        action="store_true",
        help="list the performance variables (class, unit, level, binding) up to --level "
        "(default: 9), with --all also the event types (fields, level); readable, "
        "--parsable or --json (schema 'pmca-info-pvars' v1)",
    )


def _mca_values(pairs: Sequence[Sequence[str]]) -> dict[str, str]:
    values: dict[str, str] = {}
    for name, value in pairs:
        if name in values:
            # As mpirun/ompi_info: a parameter given twice is a mistake, not a choice.
            raise UsageError(f"--mca: MCA parameter {name!r} given more than once")
        values[name] = value
    return values


def _facts(args: argparse.Namespace) -> list[Fact]:
    facts = config_facts() if args.config else []
    if args.path:
        facts.extend(path_facts(args.path))
    if args.arch and not args.config:
        facts.append(arch_fact())
    if args.hostname and not args.config:
        facts.append(hostname_fact())
    return facts


def _view(args: argparse.Namespace) -> View:
    selectors = tuple(Selector(fw, comp) for fw, comp in args.param)
    typed = bool(args.type)
    everything = args.all or (args.json and not selectors)
    level = args.level if args.level is not None else (9 if args.all or args.json else 1)
    facts = _facts(args)
    acted = (
        bool(selectors) or args.all or args.show_failed or typed or bool(facts)
    ) or args.tcp_interfaces
    return View(
        selectors=(Selector(ALL, ALL),) if everything or not selectors else selectors,
        shown=ParamFilter(level, args.internal, frozenset(args.type)),
        header=args.all or not acted,
        components=args.all or bool(selectors) or not acted,
        params=everything or bool(selectors) or typed,
        failures=args.show_failed,
        summary=not acted or args.all,
        selected_only=args.selected_only,
        facts=tuple(facts),
    )


def _warn_unknown(entries: Sequence[FrameworkEntry], space: ParamSpace) -> None:
    """Every given name no parameter has, from any source, with a "did you mean"."""
    namespaces = {
        entry.framework.name: Namespace(
            frozenset(p.full_name for p in entry.params),
            frozenset(
                [*(c.name for c in entry.components), *(f.component for f in entry.failures)]
            ),
            {
                c.name: frozenset(
                    name for p in c.params for name in (p.full_name, *(s.name for s in p.synonyms))
                )
                for c in entry.components
            },
        )
        for entry in entries
    }
    disabled = RUNTIME.catalog.disabled()
    for message in unknown_name_messages(space, namespaces, disabled, complete=True).values():
        warnings.warn(ParamWarning(message), stacklevel=1)


@contextlib.contextmanager
def _stdout_kept_clean() -> Iterator[TextIO]:
    """Yield the real stdout; meanwhile anything else printed goes to stderr.

    Component code and ``mca_base_verbose=stdout`` logging must not end up in
    the middle of ``--json`` or ``--parsable`` output.
    """
    real = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):
        yield real


def produce(args: argparse.Namespace, *, width: int | None = None) -> str:
    """Take the inventory and return the text to print (readable: wrapped at ``width``)."""
    view = _view(args)
    given = _mca_values(args.mca)
    isolate = bool(getattr(args, "isolate", False))
    with Session(mca=given, frameworks=[]), inventory(isolate=isolate) as entries:
        if args.pvars:
            from ._info_pvars import listed, listed_events, render_pvars

            level = args.level if args.level is not None else 9
            return render_pvars(
                listed(level),
                parsable=args.parsable,
                as_json=args.json,
                width=width,
                events=listed_events(level) if args.all else (),
            )
        space = RUNTIME.params
        report = Report.build(entries, RUNTIME.catalog.failures, space)
        report.check(view.selectors)
        _warn_unknown(entries, space)
        recorder: Recorder | None = getattr(args, "info_cache", None)
        if args.tcp_interfaces:
            view = evolve(view, facts=(*view.facts, *_tcp_facts(space)))
        if recorder is not None:
            # Interfaces come and go without a file changing: never cached.
            recorder.clean = not args.tcp_interfaces
            # What failed to import is not among the modules the cache watches.
            recorder.clean = (
                recorder.clean
                and not RUNTIME.catalog.failures
                and not any(entry.failures for entry in entries)
            )
            recorder.depends_on(_input_files(space))
            recorder.note_modules()  # now: dso components leave sys.modules at unload
        if args.json:
            from ._json import dumps  # json and platform, for --json only

            return dumps(report, view, space) + "\n"
        if args.parsable:
            parsable = Parsable()
            render(report, view, space, parsable)
            lines = parsable.lines()
        else:
            readable = Readable()
            render(report, view, space, readable)
            lines = readable.lines(width=width)
    return "".join(line + "\n" for line in lines)


def _tcp_facts(space: ParamSpace) -> list[Fact]:
    """btl/tcp's verdict on every interface, from the parameters as given."""
    try:
        space.get("btl_tcp_if_include")
    except UnknownParamError:
        raise UsageError("--tcp-interfaces: btl/tcp is not available (see --show-failed)") from None
    from ..btl.tcp import interface_report

    try:
        verdicts = interface_report(lambda name: space.value(f"btl_tcp_{name}"))
    except ValueError as exc:
        raise UsageError(f"--tcp-interfaces: {exc}") from None
    return [
        Fact(f"btl tcp {what}", f"btl:tcp:interface:{what.replace(' ', ':')}", verdict)
        for what, verdict in verdicts
    ]


def _input_files(space: ParamSpace) -> list[str]:
    """The parameter files and override file (read or missing) and the drop-in directories."""
    environ = space.environ
    files = str(space.value(PARAM_FILES) or "").split(",")
    files.append(str(space.value(OVERRIDE_FILE) or ""))
    directories = str(space.value("mca_base_component_path") or "").split(":")
    return [
        *(expand_home(f.strip(), environ) for f in files if f.strip()),
        *(os.path.expanduser(d) for d in directories if d),
    ]


def _terminal_width(stream: TextIO) -> int | None:
    # Like ompi_info: wrap on a terminal, never when piped (grep-friendly).
    if not stream.isatty():
        return None
    import shutil  # on a terminal only: it imports the compression modules

    return shutil.get_terminal_size().columns


def _run_check(args: argparse.Namespace) -> int:
    """``pmca info --check``: never cached (it runs the components' code)."""
    from ._info_check import FAILED, check, render_check

    if args.json:
        raise UsageError("--check: --json is not supported; use --parsable")
    recorder: Recorder | None = getattr(args, "info_cache", None)
    if recorder is not None:
        recorder.clean = False
    with _stdout_kept_clean() as stdout:
        results = check(_mca_values(args.mca), args.check or None)
        text = render_check(results, parsable=args.parsable, width=_terminal_width(stdout))
    stdout.write(text)
    stdout.flush()
    return 1 if any(r.state == FAILED for r in results) else 0


def run(args: argparse.Namespace) -> int:
    """``pmca info``; raises :class:`UsageError` (and pmca errors) for bad input."""
    if args.check is not None:
        return _run_check(args)
    with _stdout_kept_clean() as stdout:
        text = produce(args, width=_terminal_width(stdout))
    stdout.write(text)
    stdout.flush()
    recorder: Recorder | None = getattr(args, "info_cache", None)
    if recorder is not None:
        recorder.store(text)
    return 0
