"""pmca's command line: ``pmca info`` (Open MPI's ``ompi_info``), ``pmca doctor``, ``pmca new``.

Exit codes: 0 success; 2 bad input (options, ``--level``, ``--param``
names, ``--mca`` values, parameter files); 1 anything else. Errors are one
line on stderr, never a traceback.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from types import ModuleType

from .._version import __version__
from . import _info_cache

#: ``typing.TYPE_CHECKING``: a cached ``pmca info`` imports neither typing nor argparse.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import TextIO

__all__ = ["build_parser", "main"]

Handler = Callable[["argparse.Namespace"], int]

#: Written by another part of the project; absent from some builds.
_DOCTOR_MODULE = f"{__name__}._doctor"


def _version_line() -> str:
    from .._build import build_info

    return f"pmca v{__version__} ({build_info().summary()})"


def _version_action() -> type[argparse.Action]:
    """``--version``, worked out only when asked (it reads the native libraries' headers)."""
    import argparse

    class Version(argparse.Action):
        def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
            print(_version_line())
            parser.exit()

    return Version


def _doctor_module() -> ModuleType | None:
    try:
        return importlib.import_module(_DOCTOR_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name != _DOCTOR_MODULE:
            raise  # the module exists but something it imports does not
        return None


def _run_doctor(args: argparse.Namespace) -> int:
    module = _doctor_module()
    run: Handler | None = getattr(module, "run", None)
    if run is None:
        print("pmca doctor: not available in this build", file=sys.stderr)
        return 1
    return int(run(args))


def build_parser(
    *, doctor_options: bool = True, info_only: bool = False
) -> argparse.ArgumentParser:
    """The ``pmca`` parser with its ``info``, ``doctor`` and ``new`` subcommands.

    ``doctor_options=False`` leaves out the options of ``pmca doctor``,
    ``pmca stats`` and ``pmca new``, whose modules (the scenarios doctor
    runs, the templates new writes) need not be imported for ``pmca info``.
    ``info_only=True`` leaves out those subcommands altogether, for a
    command line that starts with ``info`` (nothing else can be parsed then).
    """
    import argparse

    from ._help import HelpFormatter

    parser = argparse.ArgumentParser(
        prog="pmca",
        description="Open MPI's Modular Component Architecture on pluggy.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument(
        "-V", "--version", action=_version_action(), nargs=0, help="show version and build; exit"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    from . import _info  # the session runtime: not for a cached pmca info

    info = commands.add_parser(
        "info",
        help="frameworks, components and parameters (like ompi_info)",
        formatter_class=HelpFormatter,
    )
    _info.add_arguments(info)
    info.set_defaults(handler=_info.run, prog=info.prog, command_parser=info)
    if info_only:
        return parser

    stats = commands.add_parser(
        "stats",
        help="performance variables of running pmca processes",
        formatter_class=HelpFormatter,
    )
    if doctor_options:  # like doctor's: not imported for a plain pmca info
        from . import _stats

        _stats.add_arguments(stats)
        stats.set_defaults(handler=_stats.run, prog=stats.prog, command_parser=stats)

    doctor = commands.add_parser(
        "doctor",
        help="run the machinery on this machine and report what works",
        formatter_class=HelpFormatter,
    )
    module = _doctor_module() if doctor_options else None
    add_arguments = getattr(module, "add_arguments", None)
    if callable(add_arguments):
        add_arguments(doctor)
    doctor.set_defaults(handler=_run_doctor, prog=doctor.prog, command_parser=doctor)

    new = commands.add_parser(
        "new",
        help="write a new component or framework distribution, with tests and tox",
        formatter_class=HelpFormatter,
    )
    if doctor_options:  # like doctor's: its templates are not for a plain pmca info
        from . import _new

        _new.add_arguments(new)
        new.set_defaults(handler=_new.run, prog=new.prog, command_parser=new)
    return parser


@contextlib.contextmanager
def _cli_logging() -> Iterator[None]:
    """Show records of ``mca_base_verbose=logging`` on stderr, for this run only.

    The library never configures logging; the command line is an application.
    Unless ``logging`` is imported already, the handler is attached when pmca
    first hands a record to it: a run that logs nothing that way (every
    default run) does not import ``logging``.
    """
    from ..mca._logging import when_stdlib_logging_used

    restore: list[Callable[[], None]] = []

    def attach() -> None:
        import logging

        logger = logging.getLogger("pmca")
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("[%(name)s] %(levelname)s: %(message)s"))
        saved = logger.level, logger.propagate
        logger.addHandler(handler)
        # Verbosity is already filtered per framework (<fw>_base_verbose).
        logger.setLevel(logging.DEBUG)
        logger.propagate = False

        def detach() -> None:
            logger.removeHandler(handler)
            logger.level, logger.propagate = saved

        restore.append(detach)

    if "logging" in sys.modules:
        attach()
        withdraw = None
    else:
        withdraw = when_stdlib_logging_used(attach)
    try:
        yield
    finally:
        if withdraw is not None:
            withdraw()
        for detach in restore:
            detach()


@contextlib.contextmanager
def _cli_warnings(prog: str) -> Iterator[None]:
    """Parameter warnings as ``<prog>: warning: ...`` lines on stderr."""
    import warnings

    from ..mca._errors import ComponentWarning
    from ..mca.params import ParamWarning, PmcaDeprecationWarning

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        print(f"{prog}: warning: {message}", file=sys.stderr)

    with warnings.catch_warnings():
        warnings.simplefilter("always", ParamWarning)
        warnings.simplefilter("always", PmcaDeprecationWarning)
        warnings.simplefilter("always", ComponentWarning)
        warnings.showwarning = show
        yield


@contextlib.contextmanager
def _encodable_output() -> Iterator[None]:
    """Characters stdout cannot encode (an ASCII locale) print as escapes, never fail."""
    saved: list[tuple[io.TextIOWrapper, str]] = []
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper) and stream.errors == "strict":
            saved.append((stream, stream.errors))
            stream.reconfigure(errors="backslashreplace")
    try:
        yield
    finally:
        for stream, errors in saved:
            with contextlib.suppress(ValueError):  # closed meanwhile
                stream.reconfigure(errors=errors)


def _fail(prog: str, message: str, code: int) -> int:
    print(f"{prog}: error: {message}", file=sys.stderr)
    return code


def _cached_info(words: Sequence[str]) -> int | None:
    """Print the stored output of this ``pmca info`` run, if it still holds; the exit code."""
    text = _info_cache.lookup(words, sys.stdout)
    if text is None:
        return None
    with _encodable_output():
        try:
            sys.stdout.write(text)
            sys.stdout.flush()
        except BrokenPipeError:
            return _reader_gone()
    return 0


def _reader_gone() -> int:
    """The reader went away (``| head``): stop quietly, and keep the
    interpreter from failing again when it flushes stdout at exit."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return 1


class _WatchedStream(io.TextIOBase):
    """stderr, noting whether anything was written (such a run is not cached)."""

    def __init__(self, stream: TextIO, recorder: _info_cache.Recorder) -> None:
        self._stream = stream
        self._recorder = recorder

    def write(self, text: str) -> int:
        if text:
            self._recorder.stderr_written = True
        return self._stream.write(text)

    def flush(self) -> None:
        self._stream.flush()

    def fileno(self) -> int:
        return self._stream.fileno()

    def isatty(self) -> bool:
        return self._stream.isatty()


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``pmca`` with ``argv`` (default: ``sys.argv[1:]``); return the exit code."""
    words = sys.argv[1:] if argv is None else argv
    subcommand = next((word for word in words if not word.startswith("-")), None)
    # Only as a program: in-process callers (tests, embedding) always compute.
    if argv is None and subcommand == "info":
        cached = _cached_info(words)
        if cached is not None:
            return cached
        with _no_cycle_collection():
            return _main(words, subcommand, _recorder(words))
    return _main(words, subcommand, None)


@contextlib.contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """No cyclic garbage collection in a ``pmca info`` process, which exits when done.

    Importing every component allocates many objects that live until exit;
    the collector would traverse them again and again (and once more at
    interpreter shutdown) to free next to nothing. At the end every object
    is frozen (:func:`gc.freeze`): the shutdown collections skip them, the
    process exits sooner, and ``atexit`` handlers run as always.
    """
    import gc

    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def _recorder(words: Sequence[str]) -> _info_cache.Recorder | None:
    """Where this run's output is kept for the next identical run, if anywhere."""
    directory = _info_cache.cache_directory()
    if directory is None or sys.stdout.isatty():
        return None
    return _info_cache.Recorder(words, directory)


def _main(
    words: Sequence[str], subcommand: str | None, recorder: _info_cache.Recorder | None
) -> int:
    parser = build_parser(
        doctor_options=subcommand != "info", info_only=bool(words) and words[0] == "info"
    )
    try:
        args, unknown = parser.parse_known_args(words)
        if unknown:
            # The subcommand's own usage, not pmca's: the option was meant for it.
            command: argparse.ArgumentParser = args.command_parser
            command.error(f"unrecognized arguments: {' '.join(unknown)}")
    except SystemExit as exc:  # --help, --version (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else 2
    prog: str = args.prog
    handler: Handler = args.handler
    args.info_cache = recorder
    stderr = sys.stderr
    if recorder is not None:
        sys.stderr = _WatchedStream(stderr, recorder)
    try:
        return _run(handler, args, prog)
    finally:
        sys.stderr = stderr


def _run(handler: Handler, args: argparse.Namespace, prog: str) -> int:
    from ..mca._errors import PmcaError, SelectionError
    from ..mca.params import ParamError
    from ._errors import UsageError

    with _encodable_output(), _cli_logging(), _cli_warnings(prog):
        try:
            return handler(args)
        except (UsageError, ParamError, SelectionError) as exc:
            return _fail(prog, str(exc), 2)
        except PmcaError as exc:
            return _fail(prog, f"{type(exc).__name__}: {exc}", 1)
        except BrokenPipeError:
            return _reader_gone()
        except KeyboardInterrupt:
            return 130
        except Exception as exc:
            return _fail(prog, f"internal error: {type(exc).__name__}: {exc}", 1)
