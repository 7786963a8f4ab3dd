"""Name and version rules shared by frameworks and components."""

from __future__ import annotations

import re
from collections.abc import Iterable

from attrs import frozen

from .._records import Record
from ._errors import ComponentError

FRAMEWORK_NAME = re.compile(r"[a-z][a-z0-9]*")
COMPONENT_NAME = re.compile(r"[a-z][a-z0-9_]*")
_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")


def check_framework_name(name: object) -> str:
    """Return ``name`` if it is a valid framework name.

    Framework names may not contain ``_``: parameter and drop-in file names are
    split on the first ``_`` after the framework, as in Open MPI.
    """
    if not isinstance(name, str) or not FRAMEWORK_NAME.fullmatch(name):
        raise ComponentError(f"invalid framework name {name!r}: must match [a-z][a-z0-9]* (no '_')")
    return name


def check_component_name(name: object) -> str:
    """Return ``name`` if it is a valid component name (``_`` allowed)."""
    if not isinstance(name, str) or not COMPONENT_NAME.fullmatch(name):
        raise ComponentError(f"invalid component name {name!r}: must match [a-z][a-z0-9_]*")
    return name


@frozen(order=True, repr=False)
class Version(Record):
    """A ``major.minor.patch`` version, as Open MPI's MCA structs carry them."""

    major: int
    minor: int
    patch: int

    @classmethod
    def parse(cls, text: object, *, what: str = "version") -> Version:
        if isinstance(text, Version):
            return text
        match = _VERSION.fullmatch(text) if isinstance(text, str) else None
        if match is None:
            raise ComponentError(f"invalid {what} {text!r}: expected major.minor.patch")
        return cls(int(match[1]), int(match[2]), int(match[3]))

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"


def close_matches(
    word: str, candidates: Iterable[str], *, n: int = 3, cutoff: float = 0.6
) -> list[str]:
    """The ``candidates`` closest to ``word``, for "did you mean" in error messages.

    ``difflib`` is imported here, when a name is wrong, not by every session.
    """
    import difflib

    return difflib.get_close_matches(word, list(candidates), n=n, cutoff=cutoff)
