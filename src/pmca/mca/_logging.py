"""Per-framework, per-component structured logging.

pmca never configures logging globally. Each framework gets its own
structlog logger, filtered by ``<framework>_base_verbose`` (Open MPI's
verbosity scale) and written where ``mca_base_verbose`` says: ``stderr``
(default, like Open MPI's ``opal_output``), ``stdout``, ``syslog`` (with
Open MPI's ``syslogpri:<notice|info|debug>`` and ``syslogid:<str>``), or
``logging`` to hand records to the standard library logger ``pmca.<framework>``
and let the application decide.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, MutableMapping
from typing import Any

import structlog
from attrs import frozen
from structlog.typing import FilteringBoundLogger

#: What ``mca_base_verbose`` accepts.
DESTINATION_VALID = (
    "a comma-separated list of: stderr, stdout, syslog, syslogpri:<notice|info|debug>, "
    "syslogid:<str>, logging (the standard library logger pmca.<framework>)"
)
_STREAMS = ("stderr", "stdout", "syslog", "logging")
_SYSLOG_PRIORITIES = ("notice", "info", "debug")


@frozen
class Destination:
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
        return logging.CRITICAL  # pmca never logs at critical: this silences it
    if verbosity < 20:
        return logging.ERROR
    if verbosity < 40:
        return logging.WARNING
    if verbosity < 60:
        return logging.INFO
    return logging.DEBUG


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
        stream = getattr(sys, self._stream_name)
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


def framework_logger(
    framework: str, verbosity: int | Callable[[], int], destination: str = "stderr"
) -> FilteringBoundLogger:
    """A logger bound to ``framework``; bind ``component=`` for a component.

    ``verbosity`` may be a callable, read at every call, so that a run-time
    change of ``<framework>_base_verbose`` takes effect at once.
    """
    sink: object
    where = Destination.parse(destination)
    if where.target == "logging":
        sink = logging.getLogger(f"pmca.{framework}")
    elif where.target == "syslog":
        sink = _SyslogLogger(where)
    else:
        sink = _StreamLogger(where.target)
    if callable(verbosity):
        current = verbosity

        def threshold(_logger: object, method: str, event: MutableMapping[str, Any]) -> Any:
            if _LEVELS.get(method, logging.INFO) < level_for_verbosity(current()):
                raise structlog.DropEvent
            return event

        logger: FilteringBoundLogger = structlog.wrap_logger(
            sink,
            wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
            processors=[threshold, _render],
            context_class=dict,
            cache_logger_on_first_use=False,
        )
    else:
        logger = structlog.wrap_logger(
            sink,
            wrapper_class=structlog.make_filtering_bound_logger(level_for_verbosity(verbosity)),
            processors=[_render],
            context_class=dict,
            cache_logger_on_first_use=False,
        )
    return logger.bind(framework=framework)


_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "msg": logging.INFO,
    "warning": logging.WARNING,
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "exception": logging.ERROR,
    "critical": logging.CRITICAL,
}
