"""Per-framework, per-component structured logging.

pmca never configures logging globally. Each framework gets its own
structlog logger, filtered by ``<framework>_base_verbose`` (Open MPI's
verbosity scale) and written where ``mca_base_verbose`` says: ``stderr``
(default, like Open MPI's ``opal_output``), ``stdout``, ``syslog`` (with
Open MPI's ``syslogpri:<notice|info|debug>`` and ``syslogid:<str>``), or
``logging`` to hand records to the standard library logger ``pmca.<framework>``
and let the application decide.

structlog itself (with the ``asyncio`` its ``stdlib`` module pulls in) is
imported only when an event passes the verbosity filter: at the default
verbosity a session never imports it.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, MutableMapping
from typing import TYPE_CHECKING, Any, cast

from attrs import frozen

from .._records import FrozenValue

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

#: What ``mca_base_verbose`` accepts.
DESTINATION_VALID = (
    "a comma-separated list of: stderr, stdout, syslog, syslogpri:<notice|info|debug>, "
    "syslogid:<str>, logging (the standard library logger pmca.<framework>)"
)
_STREAMS = ("stderr", "stdout", "syslog", "logging")
_SYSLOG_PRIORITIES = ("notice", "info", "debug")
#: The standard library's levels (``DEBUG``...), without importing
#: ``logging`` into every session: only the ``logging`` destination needs it.
DEBUG, INFO, WARNING, ERROR, CRITICAL = 10, 20, 30, 40, 50


@frozen(eq=False, repr=False)
class Destination(FrozenValue):
    """A parsed ``mca_base_verbose`` value."""

    target: str = "stderr"
    syslog_priority: str = "info"
    syslog_ident: str = "pmca"

    @classmethod
    def parse(cls, text: str) -> Destination:
        """Parse ``mca_base_verbose``; raise :class:`ValueError` naming the bad item."""
        target, priority, ident = "stderr", "info", "pmca"
        targets: list[str] = []
        for item in (part.strip() for part in text.split(",")):
            key, colon, argument = item.partition(":")
            if item in _STREAMS:
                targets.append(item)
            elif key == "syslogpri" and colon and argument in _SYSLOG_PRIORITIES:
                priority = argument
            elif key == "syslogid" and colon and argument:
                ident = argument
            elif key in ("file", "fileappend", "level"):
                raise ValueError(f"{item!r}: Open MPI's {key!r} is not supported by pmca")
            else:
                raise ValueError(f"{item!r} is not a destination")
        if len(targets) > 1:
            raise ValueError(f"more than one destination ({', '.join(targets)})")
        if targets:
            target = targets[0]
        return cls(target, priority, ident)


def level_for_verbosity(verbosity: int) -> int:
    """Map Open MPI's 0-100 verbosity to a stdlib level (``-1`` silences)."""
    if verbosity < 0:
        return CRITICAL  # pmca never logs at critical: this silences it
    if verbosity < 20:
        return ERROR
    if verbosity < 40:
        return WARNING
    if verbosity < 60:
        return INFO
    return DEBUG


def _render(_logger: object, method: str, event: MutableMapping[str, Any]) -> str:
    where = event.pop("framework", "pmca")
    component = event.pop("component", None)
    if component:
        where = f"{where}/{component}"
    message = event.pop("event", "")
    extras = " ".join(f"{key}={value!r}" for key, value in event.items())
    text = f"[pmca:{where}] {method}: {message}"
    return f"{text} {extras}" if extras else text


class _StreamLogger:
    """Writes rendered lines to a stream looked up at call time (pytest swaps them)."""

    def __init__(self, stream_name: str) -> None:
        self._stream_name = stream_name

    def msg(self, message: str) -> None:
        stream = getattr(sys, self._stream_name, None)
        if stream is None:  # sys.stderr = None (pythonw, a daemon): nowhere to write
            return
        stream.write(message + "\n")
        stream.flush()

    log = debug = info = warning = warn = error = critical = exception = msg


class _SyslogLogger:
    """Sends rendered lines to the system log, as Open MPI's ``syslog`` output does."""

    def __init__(self, destination: Destination) -> None:
        import syslog

        self._syslog = syslog
        self._priority = getattr(syslog, f"LOG_{destination.syslog_priority.upper()}")
        self._ident = destination.syslog_ident

    def msg(self, message: str) -> None:
        self._syslog.openlog(self._ident, self._syslog.LOG_PID, self._syslog.LOG_USER)
        self._syslog.syslog(self._priority, message)

    log = debug = info = warning = warn = error = critical = exception = msg


#: Called once, in order, when a logger of the ``logging`` destination is first
#: made (see :func:`when_stdlib_logging_used`).
_STDLIB_HOOKS: list[Callable[[], None]] = []


def when_stdlib_logging_used(hook: Callable[[], None]) -> Callable[[], None]:
    """Call ``hook`` when pmca first hands a record to the standard library's ``logging``.

    For an application (the ``pmca`` command) that shows those records: it
    attaches its handler then, and a run that logs nothing through
    ``logging`` never imports it. Returns a function that withdraws ``hook``
    if it has not run yet.
    """
    _STDLIB_HOOKS.append(hook)

    def withdraw() -> None:
        with contextlib.suppress(ValueError):
            _STDLIB_HOOKS.remove(hook)

    return withdraw


def _stdlib_logging_used() -> None:
    while _STDLIB_HOOKS:
        _STDLIB_HOOKS.pop(0)()


def framework_logger(
    framework: str, verbosity: int | Callable[[], int], destination: str = "stderr"
) -> FilteringBoundLogger:
    """A logger bound to ``framework``; bind ``component=`` for a component.

    ``verbosity`` may be a callable, read at every call, so that a run-time
    change of ``<framework>_base_verbose`` takes effect at once.
    """
    where = Destination.parse(destination)  # a bad value is refused now, not at first use
    if callable(verbosity):
        current = verbosity

        def threshold() -> int:
            return level_for_verbosity(current())

    else:
        level = level_for_verbosity(verbosity)

        def threshold() -> int:
            return level

    maker = _StructlogMaker(framework, where, threshold)
    return cast("FilteringBoundLogger", _DeferredLogger(maker, threshold, {"framework": framework}))


class _StructlogMaker:
    """Builds the one structlog logger of a framework, the first time an event passes."""

    def __init__(self, framework: str, where: Destination, threshold: Callable[[], int]) -> None:
        self._framework = framework
        self._where = where
        self._threshold = threshold
        self._logger: FilteringBoundLogger | None = None

    def __call__(self) -> FilteringBoundLogger:
        if self._logger is None:
            self._logger = _structlog_logger(self._framework, self._where, self._threshold)
        return self._logger


def _structlog_logger(
    framework: str, where: Destination, threshold: Callable[[], int]
) -> FilteringBoundLogger:
    import structlog

    sink: object
    if where.target == "logging":
        import logging

        _stdlib_logging_used()
        sink = logging.getLogger(f"pmca.{framework}")
    elif where.target == "syslog":
        sink = _SyslogLogger(where)
    else:
        sink = _StreamLogger(where.target)

    def drop_below_threshold(_logger: object, method: str, event: MutableMapping[str, Any]) -> Any:
        if _LEVELS.get(method, INFO) < threshold():
            raise structlog.DropEvent
        return event

    logger: FilteringBoundLogger = structlog.wrap_logger(
        sink,
        wrapper_class=structlog.make_filtering_bound_logger(DEBUG),
        processors=[drop_below_threshold, _render],
        context_class=dict,
        cache_logger_on_first_use=False,
    )
    return logger


class _DeferredLogger:
    """A bound logger that filters by level before structlog is even imported.

    Behaves as the structlog ``FilteringBoundLogger`` it stands for: events
    below the threshold cost one comparison; the first one that passes
    builds the real logger (shared by everything bound from the same
    framework logger) and is handed to it with the bound context.
    """

    __slots__ = ("_context", "_maker", "_threshold")

    def __init__(
        self,
        maker: Callable[[], FilteringBoundLogger],
        threshold: Callable[[], int],
        context: dict[str, Any],
    ) -> None:
        self._maker = maker
        self._threshold = threshold
        self._context = context

    def bind(self, **values: Any) -> _DeferredLogger:
        return _DeferredLogger(self._maker, self._threshold, {**self._context, **values})

    def new(self, **values: Any) -> _DeferredLogger:
        return _DeferredLogger(self._maker, self._threshold, dict(values))

    def unbind(self, *keys: str) -> _DeferredLogger:
        missing = [key for key in keys if key not in self._context]
        if missing:
            raise KeyError(missing[0])
        return self.try_unbind(*keys)

    def try_unbind(self, *keys: str) -> _DeferredLogger:
        kept = {k: v for k, v in self._context.items() if k not in keys}
        return _DeferredLogger(self._maker, self._threshold, kept)

    def _real(self) -> Any:
        return self._maker().new(**self._context)

    def _emit(self, method: str, event: str | None, args: tuple[Any, ...], kw: Any) -> Any:
        if _LEVELS.get(method, INFO) < self._threshold():
            return None
        return _contained(getattr(self._real(), method))(event, *args, **kw)

    def debug(self, event: str | None = None, *args: Any, **kw: Any) -> Any:
        return self._emit("debug", event, args, kw)

    def info(self, event: str | None = None, *args: Any, **kw: Any) -> Any:
        return self._emit("info", event, args, kw)

    def msg(self, event: str | None = None, *args: Any, **kw: Any) -> Any:
        return self._emit("msg", event, args, kw)

    def warning(self, event: str | None = None, *args: Any, **kw: Any) -> Any:
        return self._emit("warning", event, args, kw)

    warn = warning

    def error(self, event: str | None = None, *args: Any, **kw: Any) -> Any:
        return self._emit("error", event, args, kw)

    err = error

    def exception(self, event: str | None = None, *args: Any, **kw: Any) -> Any:
        return self._emit("exception", event, args, kw)

    def critical(self, event: str | None = None, *args: Any, **kw: Any) -> Any:
        return self._emit("critical", event, args, kw)

    fatal = critical

    def is_enabled_for(self, level: int) -> bool:
        return level >= self._threshold()

    def __getattr__(self, name: str) -> Any:
        # Anything rarer (async methods, log(level, ...)): the real logger's.
        found = getattr(self._real(), name)
        return _contained(found) if callable(found) else found

    def __repr__(self) -> str:
        return f"<pmca logger {self._context!r}>"


def _contained(method: Callable[..., Any]) -> Callable[..., Any]:
    """``method``, unable to raise: a log line never aborts the work it reports.

    Failure paths log before or after changing state; a closed stderr, a
    broken pipe or a raising processor would otherwise escape from them
    (``BrokenPipeError`` from a wait instead of the peer's failure).
    """

    def call(*args: Any, **kw: Any) -> Any:
        try:
            return method(*args, **kw)
        except Exception:  # the line is lost; what it was about goes on
            return None

    return call


_LEVELS = {
    "debug": DEBUG,
    "info": INFO,
    "msg": INFO,
    "warning": WARNING,
    "warn": WARNING,
    "error": ERROR,
    "exception": ERROR,
    "critical": CRITICAL,
}
