"""Errors and warnings of the parameter space.

Every message names the parameter, the value, where the value came from and
what would have been accepted: the reader is usually looking at one line of
output from one rank out of many, with no way to ask a follow-up question.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._public import public
from .._errors import PmcaError

if TYPE_CHECKING:
    from ._values import Origin


@public
class ParamError(PmcaError, ValueError):
    """Base class of every error the parameter space raises on purpose.

    A :class:`ValueError` too: every one of them is about a bad name or value.
    """


@public
class ParamValueError(ParamError):
    """A value has the wrong type or lies outside the parameter's valid values.

    :ivar param_name: the parameter's full name.
    :ivar value: the offending value, as given.
    :ivar origin: where the value came from.
    :ivar valid_values: a description of what would have been accepted.
    :ivar reason: what exactly is wrong with the value.
    :ivar given_as: the synonym the value was given under, if not the full name.
    """

    def __init__(
        self,
        param_name: str,
        value: object,
        origin: Origin,
        valid_values: str,
        reason: str,
        *,
        given_as: str | None = None,
    ) -> None:
        self.param_name = param_name
        self.value = value
        self.origin = origin
        self.valid_values = valid_values
        self.reason = reason
        self.given_as = given_as
        shown = repr(value if isinstance(value, str) else repr(value))
        if len(shown) > _SHOWN_MAX:  # a 5,000-character path would bury the message
            shown = f"{shown[: _SHOWN_MAX // 2]}...{shown[-20:]} ({len(str(value))} characters)"
        alias = f" (given as {given_as!r})" if given_as else ""
        # A reason that already states what is valid (a check of one's own
        # raising "expected 0 to 9") is not followed by the same words again.
        valid = "" if valid_values and valid_values in reason else f"; valid values: {valid_values}"
        super().__init__(
            f"invalid value {shown} for MCA parameter {param_name!r}{alias} "
            f"from {origin}: {reason}{valid}"
        )


#: The longest value an error message shows whole.
_SHOWN_MAX = 200


@public
class ParamFileError(ParamError):
    """A parameter file is malformed, unreadable, or missing although named.

    The message starts with ``path:line:`` (or ``path:`` when the problem is
    the file as a whole), as compilers do, so editors can jump to it.
    """

    def __init__(self, path: str, lineno: int | None, problem: str) -> None:
        self.path = path
        self.lineno = lineno
        self.problem = problem
        where = f"{path}:{lineno}" if lineno is not None else path
        super().__init__(f"{where}: {problem}")


@public
class ParamPermissionError(ParamError):
    """A parameter cannot be changed: read-only, locked, or set by the override file."""

    def __init__(self, param_name: str, value: object, origin: Origin, why: str) -> None:
        self.param_name = param_name
        self.value = value
        self.origin = origin
        self.why = why
        shown = value if isinstance(value, str) else repr(value)
        super().__init__(
            f"cannot set MCA parameter {param_name!r} to {shown!r} (from {origin}): {why}"
        )


@public
class UnknownParamError(ParamError, LookupError):
    """No registered parameter (or synonym) has this name."""

    def __init__(self, name: str, close_matches: list[str], reason: str | None = None) -> None:
        self.name = name
        self.close_matches = close_matches
        #: Why a parameter that exists is not registered here (its component is not open).
        self.reason = reason
        if reason is not None:
            super().__init__(f"MCA parameter {name!r} is not registered in this session: {reason}")
            return
        hint = f"; did you mean: {', '.join(close_matches)}?" if close_matches else ""
        super().__init__(f"unknown MCA parameter {name!r}{hint}")


@public
class ParamRegistrationError(ParamError):
    """A registration conflicts with an existing parameter or is malformed."""


@public
class PmcaDeprecationWarning(DeprecationWarning):
    """A value was given under a deprecated parameter name.

    Python hides :class:`DeprecationWarning` outside ``__main__`` by default;
    front ends that want Open MPI's always-visible behaviour enable this
    category with :func:`warnings.simplefilter`.
    """


@public
class ParamWarning(UserWarning):
    """A value was given where it is ignored (for example a core parameter in a file)."""
