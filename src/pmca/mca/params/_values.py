"""Parameter types, enumerations, info levels, sources, and value parsing.

Parsing follows Open MPI's ``var_set_from_string`` where that is well defined
(integers as ``strtoull(..., 0)`` with ``k``/``m``/``g`` suffixes, the bool and
verbosity enumerators) and is stricter where Open MPI silently accepts
nonsense (a bool of ``2``, a size of ``-1``, trailing garbage).
"""

from __future__ import annotations

import enum
import math
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from ..._public import public
from ..._records import FrozenValue

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_UINT64_MAX = 2**64 - 1

#: ``strtoull(s, &end, 0)`` followed by an optional k/m/g suffix, as one regex.
#: A leading ``0`` means octal, exactly as in C; ``08`` is therefore invalid.
#: Compiled at first use (``re`` caches it): a plain ``pmca info`` parses no value.
_INTEGER = r"([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)([kKmMgG]?)"
_SHIFT = {"": 0, "k": 10, "m": 20, "g": 30}
_DECIMAL = re.compile(r"[+-]?[0-9]+")
#: A C ``strtod`` number in ASCII: Python's ``float()`` also takes other
#: scripts' digits (ARABIC-INDIC THREE, FULLWIDTH ZERO) and ``_`` separators.
#: Compiled at first use, as ``_INTEGER``.
_FLOAT = r"(?i)[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)"
#: The blanks stripped around a value: C's isspace(), not Unicode's.
_BLANKS = " \t\n\r\f\v"


@public
class InvalidValue(Exception):
    """A value failed to parse or check; the space adds name, origin and valid values.

    Raised by a parameter's ``check`` (see :meth:`ParamSpace.register`) with
    the reason the value is wrong.
    """


@public
class ParamType(enum.Enum):
    """The value type of a parameter.

    Enumerations are :attr:`INT` parameters with an :class:`Enumeration`
    attached, as in Open MPI, where enumerators are only allowed on integers.
    """

    BOOL = "bool"
    INT = "int"
    SIZE = "size"
    FLOAT = "float"
    STRING = "string"
    LIST = "list"

    @property
    def type_name(self) -> str:
        """The name printed by the dump formats (Open MPI's where one exists)."""
        return _TYPE_NAMES[self]


_TYPE_NAMES = {
    ParamType.BOOL: "bool",
    ParamType.INT: "int",
    ParamType.SIZE: "size_t",
    ParamType.FLOAT: "double",
    ParamType.STRING: "string",
    ParamType.LIST: "list",
}

_TYPE_ALIASES: dict[object, ParamType] = {
    bool: ParamType.BOOL,
    int: ParamType.INT,
    float: ParamType.FLOAT,
    str: ParamType.STRING,
    list: ParamType.LIST,
    tuple: ParamType.LIST,
    "bool": ParamType.BOOL,
    "int": ParamType.INT,
    "size": ParamType.SIZE,
    "size_t": ParamType.SIZE,
    "float": ParamType.FLOAT,
    "double": ParamType.FLOAT,
    "str": ParamType.STRING,
    "string": ParamType.STRING,
    "list": ParamType.LIST,
}


@public
class InfoLevel(enum.IntEnum):
    """Who a parameter is for, Open MPI's ``OPAL_INFO_LVL_1..9``."""

    USER_BASIC = 1
    USER_DETAIL = 2
    USER_ALL = 3
    TUNER_BASIC = 4
    TUNER_DETAIL = 5
    TUNER_ALL = 6
    DEV_BASIC = 7
    DEV_DETAIL = 8
    DEV_ALL = 9

    @property
    def label(self) -> str:
        """Open MPI's text, for example ``user/basic``."""
        who, what = self.name.lower().split("_")
        return f"{who}/{what}"

    def __str__(self) -> str:
        return f"{int(self)} {self.label}"


@public
class Source(enum.IntEnum):
    """Where a value came from; a higher member beats a lower one."""

    DEFAULT = 0
    FILE = 1
    ENV = 2
    API = 3
    SET = 4
    OVERRIDE = 5

    @property
    def label(self) -> str:
        """Open MPI's name for the source (``API`` prints as ``command line``)."""
        return _SOURCE_LABELS[self]

    def __str__(self) -> str:
        return self.label


_SOURCE_LABELS = {
    Source.DEFAULT: "default",
    Source.FILE: "file",
    Source.ENV: "environment",
    Source.API: "command line",
    Source.SET: "set",
    Source.OVERRIDE: "override",
}


@public
@attrs.frozen(eq=False, repr=False)
class Origin(FrozenValue):
    """Where one value came from.

    ``detail`` is the environment variable name for :attr:`Source.ENV` and
    ``path:line`` for :attr:`Source.FILE` and :attr:`Source.OVERRIDE`.
    """

    source: Source
    detail: str | None = None

    @classmethod
    def file(cls, path: str, lineno: int, *, override: bool = False) -> Origin:
        """The origin of line ``lineno`` of parameter file ``path``."""
        return cls(Source.OVERRIDE if override else Source.FILE, f"{path}:{lineno}")

    def __str__(self) -> str:
        label = self.source.label
        return f"{label} ({self.detail})" if self.detail else label


DEFAULT_ORIGIN = Origin(Source.DEFAULT)


def _pairs(items: Mapping[str, int] | Iterable[tuple[str, int]]) -> tuple[tuple[str, int], ...]:
    pairs = items.items() if isinstance(items, Mapping) else items
    return tuple((str(name), int(value)) for name, value in pairs)


@public
@attrs.frozen(eq=False, repr=False)
class Enumeration(FrozenValue):
    """Named integer values, Open MPI's ``mca_base_var_enum_t``.

    Names match case-insensitively; a decimal number matches the value it
    equals. With ``clamp`` set, any integer is accepted and clamped into the
    range (Open MPI's verbosity enumerator). ``aliases`` are extra accepted
    spellings that are never printed (the bool spellings).
    """

    name: str
    values: tuple[tuple[str, int], ...] = attrs.field(converter=_pairs)
    aliases: tuple[tuple[str, int], ...] = attrs.field(default=(), converter=_pairs)
    clamp: tuple[int, int] | None = None

    def __attrs_post_init__(self) -> None:
        if not self.values:
            raise ValueError(f"enumeration {self.name!r} has no values")
        seen: set[str] = set()
        for label, _ in (*self.values, *self.aliases):
            key = label.casefold()
            # A numeric or blank name would be shadowed by the number rule.
            if not label.strip() or _DECIMAL.fullmatch(label.strip()) or label != label.strip():
                raise ValueError(f"enumeration {self.name!r}: invalid name {label!r}")
            if key in seen:
                raise ValueError(f"enumeration {self.name!r}: duplicate name {label!r}")
            seen.add(key)
        numbers = [value for _, value in self.values]
        if len(set(numbers)) != len(numbers):
            raise ValueError(f"enumeration {self.name!r}: duplicate values")
        if self.clamp is not None and self.clamp[0] > self.clamp[1]:
            raise ValueError(f"enumeration {self.name!r}: empty clamp range {self.clamp}")

    @classmethod
    def create(
        cls,
        name: str,
        values: Mapping[str, int] | Iterable[tuple[str, int]],
        *,
        aliases: Mapping[str, int] | Iterable[tuple[str, int]] = (),
        clamp: tuple[int, int] | None = None,
    ) -> Enumeration:
        """Build an enumeration from ``{name: value}`` (order is kept for printing)."""
        return cls(name, _pairs(values), _pairs(aliases), clamp)

    def parse(self, text: str) -> int:
        """Map a spelling or a number to its value; raise :class:`InvalidValue`."""
        stripped = text.strip(_BLANKS)
        if _DECIMAL.fullmatch(stripped):
            return self.check(int(stripped, 10))
        key = stripped.casefold()
        for label, value in (*self.values, *self.aliases):
            if label.casefold() == key:
                return value
        raise InvalidValue(f"not one of the names of enumeration {self.name!r}")

    def check(self, value: int) -> int:
        """Validate (or clamp) an integer value."""
        if self.clamp is not None:
            low, high = self.clamp
            return min(max(value, low), high)
        if any(value == known for _, known in self.values):
            return value
        raise InvalidValue(f"{value} is not a value of enumeration {self.name!r}")

    def to_string(self, value: int) -> str:
        """The printed form of ``value``: its name, or the number when it has none."""
        for label, known in self.values:
            if known == value:
                return label
        return str(value)

    def listing(self) -> str:
        """Open MPI's "Valid values" text: ``-1|auto, 0|f|false|disabled|no|n, ...``.

        One entry per value, in value order, each ``<value>|<names>`` (an
        alias that abbreviates the name comes first, as Open MPI prints
        ``0|f|false``); a clamped enumeration ends with its numeric range.
        """
        entries = []
        for label, value in sorted(self.values, key=lambda pair: pair[1]):
            aliases = [alias for alias, target in self.aliases if target == value]
            names = [a for a in aliases if label.startswith(a)]
            names += [label, *(a for a in aliases if not label.startswith(a))]
            entries.append(f"{value}|{'|'.join(names)}")
        if self.clamp is not None:
            entries.append(f"{max(self.clamp[0], 0)}-{self.clamp[1]}")
        return ", ".join(entries)

    def describe(self) -> str:
        """Human-readable valid values, in the spirit of Open MPI's ``Valid values:``."""
        parts = []
        for label, value in self.values:
            spellings = [label] + [alias for alias, v in self.aliases if v == value]
            parts.append(f"{value}: {'|'.join(spellings)}")
        text = ", ".join(parts)
        if self.clamp is not None:
            text += f", or any integer (clamped to {self.clamp[0]} - {self.clamp[1]})"
        return text + " (names are case-insensitive)"


_FALSE_SPELLINGS = ("f", "disabled", "no", "n")
_TRUE_SPELLINGS = ("t", "enabled", "yes", "y")
_BOOL_ALIASES = tuple((s, 0) for s in _FALSE_SPELLINGS) + tuple((s, 1) for s in _TRUE_SPELLINGS)

#: The enumerator behind :attr:`ParamType.BOOL` (``0|f|false|disabled|no|n`` /
#: ``1|t|true|enabled|yes|y``, case-insensitive; prints ``true``/``false``).
BOOL_ENUM = Enumeration("bool", (("false", 0), ("true", 1)), _BOOL_ALIASES)

#: ``false|true|auto`` → 0/1/-1, plus the bool spellings (Open MPI's auto_bool).
AUTO_BOOL = Enumeration("auto_bool", (("false", 0), ("true", 1), ("auto", -1)), _BOOL_ALIASES)

#: Open MPI's verbosity levels; any integer is accepted and clamped to -1..100.
VERBOSITY = Enumeration(
    "verbosity",
    (
        ("none", -1),
        ("error", 0),
        ("component", 10),
        ("warn", 20),
        ("info", 40),
        ("trace", 60),
        ("debug", 80),
        ("max", 100),
    ),
    clamp=(-1, 100),
)


def resolve_type(spec: object) -> tuple[ParamType, Enumeration | None]:
    """Interpret ``register(type=...)``: a :class:`ParamType`, Python type, name or enumeration."""
    if isinstance(spec, ParamType):
        return spec, None
    if isinstance(spec, Enumeration):
        return ParamType.INT, spec
    try:
        return _TYPE_ALIASES[spec], None
    except (KeyError, TypeError):
        pass
    known = "bool, int, float, str, list, 'size', a ParamType or an Enumeration"
    raise ValueError(f"unsupported parameter type {spec!r}; use {known}")


def parse_integer(text: str, *, unsigned: bool) -> int:
    """Parse like ``strtoull(text, &end, 0)`` plus a k/m/g suffix (x2^10/20/30)."""
    match = re.fullmatch(_INTEGER, text.strip(_BLANKS))
    if match is None:
        raise InvalidValue("not an integer")
    sign, digits, suffix = match.groups()
    if digits[:2].lower() == "0x":
        number = int(digits[2:], 16)
    elif digits.startswith("0"):
        number = int(digits, 8)
    else:
        number = int(digits, 10)
    number <<= _SHIFT[suffix.lower()]
    if sign == "-":
        number = -number
    return check_integer(number, unsigned=unsigned)


def check_integer(number: int, *, unsigned: bool) -> int:
    """Range-check a parsed integer (64-bit, signed or unsigned)."""
    low, high = (0, _UINT64_MAX) if unsigned else (_INT64_MIN, _INT64_MAX)
    if not low <= number <= high:
        raise InvalidValue(f"{number} is out of range [{low}, {high}]")
    return number


def parse_float(text: str) -> float:
    """Parse a C-style floating-point number (ASCII digits, no ``_`` separators, no NaN)."""
    stripped = text.strip(_BLANKS)
    if not re.fullmatch(_FLOAT, stripped):
        raise InvalidValue("not a floating-point number (ASCII digits)")
    number = float(stripped)
    if math.isnan(number):
        raise InvalidValue("NaN is not a usable setting")
    return number


def parse_list(text: str) -> tuple[str, ...]:
    """Split on commas, strip each item, drop empty items (``""`` is the empty list)."""
    return tuple(item.strip() for item in text.split(",") if item.strip())


def convert(ptype: ParamType, enumeration: Enumeration | None, raw: object) -> Any:
    """Turn a raw value (text from a file/environment, or a Python object) into a typed value.

    Raises :class:`InvalidValue` with the reason; the caller adds context.
    """
    if enumeration is not None:
        if isinstance(raw, bool):
            # Lets Session(mca={"mpi_leave_pinned": True}) work with AUTO_BOOL.
            return enumeration.parse("true" if raw else "false")
        if isinstance(raw, int):
            return enumeration.check(raw)
        if isinstance(raw, str):
            return enumeration.parse(raw)
        raise InvalidValue(f"expected a name or an integer, not {type(raw).__name__}")
    return _CONVERTERS[ptype](raw)


def _to_bool(raw: object) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, int) and raw in (0, 1):
        return bool(raw)
    if isinstance(raw, str):
        try:
            return bool(BOOL_ENUM.parse(raw))
        except InvalidValue:
            raise InvalidValue("not a boolean") from None
    raise InvalidValue(f"expected a boolean, not {type(raw).__name__} {raw!r}")


def _integer_converter(unsigned: bool) -> Any:
    def _to_integer(raw: object) -> int:
        # bool is an int subclass, but True for a port number is a bug, not a value.
        if isinstance(raw, int) and not isinstance(raw, bool):
            return check_integer(raw, unsigned=unsigned)
        if isinstance(raw, str):
            return parse_integer(raw, unsigned=unsigned)
        raise InvalidValue(f"expected an integer, not {type(raw).__name__} {raw!r}")

    return _to_integer


def _to_float(raw: object) -> float:
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        try:
            number = float(raw)
        except OverflowError:  # an int beyond any double
            raise InvalidValue(f"{raw} is beyond a floating-point number") from None
        if math.isnan(number):
            raise InvalidValue("NaN is not a usable setting")
        return number
    if isinstance(raw, str):
        return parse_float(raw)
    raise InvalidValue(f"expected a number, not {type(raw).__name__} {raw!r}")


def _to_string(raw: object) -> str:
    if isinstance(raw, str):
        return raw
    if isinstance(raw, os.PathLike):
        return os.fspath(raw)  # type: ignore[no-any-return]
    raise InvalidValue(f"expected a string, not {type(raw).__name__} {raw!r}")


def _to_list(raw: object) -> tuple[str, ...]:
    if isinstance(raw, str):
        return parse_list(raw)
    if isinstance(raw, (list, tuple)):
        items = []
        for item in raw:
            # Items must survive printing as a comma-joined string and re-parsing.
            if not isinstance(item, str) or "," in item or not item.strip():
                raise InvalidValue(f"list item {item!r} is not a non-empty string without ','")
            items.append(item.strip())
        return tuple(items)
    raise InvalidValue(f"expected a comma-separated string or a list, not {type(raw).__name__}")


_CONVERTERS: dict[ParamType, Any] = {
    ParamType.BOOL: _to_bool,
    ParamType.INT: _integer_converter(unsigned=False),
    ParamType.SIZE: _integer_converter(unsigned=True),
    ParamType.FLOAT: _to_float,
    ParamType.STRING: _to_string,
    ParamType.LIST: _to_list,
}


def value_to_string(ptype: ParamType, enumeration: Enumeration | None, value: object) -> str:
    """Print a typed value the way Open MPI does; parsing the result gives ``value`` back."""
    if value is None:
        return ""
    if enumeration is not None and isinstance(value, int):
        return enumeration.to_string(value)
    if ptype is ParamType.BOOL:
        return "true" if value else "false"
    if ptype is ParamType.LIST and isinstance(value, tuple):
        return ",".join(str(item) for item in value)
    if ptype is ParamType.FLOAT and isinstance(value, float):
        return repr(value)
    return str(value)


def describe_valid(ptype: ParamType, enumeration: Enumeration | None) -> str:
    """What values a parameter of this type accepts, for messages and dumps."""
    if enumeration is not None:
        return enumeration.describe()
    return _VALID_TEXT[ptype]


_VALID_TEXT = {
    ParamType.BOOL: BOOL_ENUM.describe(),
    ParamType.INT: (
        "an integer from -2^63 to 2^63-1 (decimal, 0x hex or leading-0 octal, "
        "optional k/m/g suffix for x2^10/x2^20/x2^30)"
    ),
    ParamType.SIZE: (
        "a non-negative integer up to 2^64-1 (decimal, 0x hex or leading-0 octal, "
        "optional k/m/g suffix for x2^10/x2^20/x2^30)"
    ),
    ParamType.FLOAT: "a floating-point number (not NaN)",
    ParamType.STRING: "any string",
    ParamType.LIST: "a comma-separated list of items",
}
