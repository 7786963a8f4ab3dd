"""The framework selection parameter: include and exclude lists."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from attrs import frozen

from .._records import FrozenValue
from ._errors import SelectionError, warn_user
from ._framework import Alias
from ._names import close_matches


@frozen(eq=False, repr=False)
class Selection(FrozenValue):
    """A parsed ``<framework>`` parameter value.

    ``names`` is empty and ``exclude`` is ``False`` when the value was empty:
    every component is eligible.
    """

    names: tuple[str, ...] = ()
    exclude: bool = False

    @property
    def is_everything(self) -> bool:
        return not self.names and not self.exclude

    def admits(self, name: str) -> bool:
        """Whether component ``name`` (already de-aliased) may be loaded."""
        if self.is_everything:
            return True
        return (name in self.names) != self.exclude

    def __str__(self) -> str:
        return ("^" if self.exclude else "") + ",".join(self.names)


def parse_selection(value: str, *, parameter: str, source: str = "") -> Selection:
    """Parse ``a,b,c`` (include) or ``^a,b`` (exclude).

    A ``^`` anywhere but at the very start, and empty items, are errors that
    name the parameter and where its value came from.
    """
    where = f"parameter {parameter!r} = {value!r}" + (f" (from {source})" if source else "")
    text = value.strip()
    if not text:
        return Selection()
    exclude = text.startswith("^")
    if exclude:
        text = text[1:]
    items = [item.strip() for item in text.split(",")]
    for item in items:
        if not item:
            raise SelectionError(f"{where}: empty component name in the list")
        if "^" in item:
            raise SelectionError(
                f"{where}: '^' may only appear once, at the start of the list "
                f"(it excludes every component listed)"
            )
    return Selection(tuple(dict.fromkeys(items)), exclude)


def resolve_aliases(
    selection: Selection,
    aliases: Mapping[str, Alias],
) -> tuple[Selection, list[tuple[str, str]]]:
    """Replace alias names by their targets.

    Returns the new selection and the ``(alias, target)`` pairs used with a
    deprecated alias, for the caller to warn about.
    """
    deprecated: list[tuple[str, str]] = []
    names: list[str] = []
    for name in selection.names:
        alias = aliases.get(name)
        if alias is None:
            names.append(name)
            continue
        if alias.deprecated:
            deprecated.append((name, alias.target))
        names.append(alias.target)
    return Selection(tuple(dict.fromkeys(names)), selection.exclude), deprecated


def check_included_exist(
    selection: Selection,
    available: Iterable[str],
    aliases: Mapping[str, Alias],
    *,
    framework: str,
    source: str,
) -> None:
    """Raise if an include list names a component that does not exist."""
    if selection.exclude:
        return
    known = set(available)
    missing = [name for name in selection.names if name not in known]
    if missing:
        listing = ", ".join(sorted(known)) or "(none)"
        alias_text = ", ".join(f"{a} -> {t.target}" for a, t in sorted(aliases.items()))
        raise SelectionError(
            f"framework {framework!r}: requested component(s) {', '.join(missing)} "
            f"not found (selection {str(selection)!r} from {source}); available: {listing}"
            + (f"; aliases: {alias_text}" if alias_text else "")
        )


def check_excluded_exist(
    selection: Selection,
    available: Iterable[str],
    aliases: Mapping[str, Alias],
    *,
    framework: str,
    source: str,
) -> None:
    """Warn when an exclude list names a component that does not exist.

    Excluding nothing is harmless (Open MPI ignores it) but almost always a
    typo that leaves the component meant to be excluded in place.
    """
    if not selection.exclude:
        return
    known = set(available)
    missing = [name for name in selection.names if name not in known]
    if missing:
        from .params import ParamWarning

        listing = ", ".join(sorted(known)) or "(none)"
        close = [m for name in missing for m in close_matches(name, known, n=1)]
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        warn_user(
            ParamWarning(
                f"framework {framework!r}: excluded component(s) {', '.join(missing)} "
                f"do not exist (selection {str(selection)!r} from {source}){hint}; "
                f"available: {listing}"
            )
        )
