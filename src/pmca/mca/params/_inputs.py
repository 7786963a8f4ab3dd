"""The raw inputs of a parameter space: environment, API values, parameter files, override file.

They are read once, when the space is built, and kept *pending* by name
until a parameter of that name (or synonym) is registered and resolves its
value from them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import attrs

from ..._public import public
from ..._records import FrozenValue
from ._errors import ParamFileError, ParamWarning
from ._param import Param
from ._paramfile import expand_home, parse_param_file
from ._values import Origin, Source
from ._warnings import warn_from_caller

if TYPE_CHECKING:
    from ._entry import Entry

#: Environment variables ``PMCA_MCA_<full_name>`` give parameter values.
ENV_PREFIX = "PMCA_MCA_"
PARAM_FILES = "mca_base_param_files"
OVERRIDE_FILE = "mca_base_override_param_file"

#: Pending sources, in the order resolution consults them.
LOOKUP_ORDER = (Source.OVERRIDE, Source.API, Source.ENV, Source.FILE)
_DISABLED = ("", "none")


@public
def default_param_files() -> str:
    """``~/.pmca/mca-params.conf,<sys.prefix>/etc/pmca-mca-params.conf``."""
    system = os.path.join(sys.prefix, "etc", "pmca-mca-params.conf")
    return f"~/.pmca/mca-params.conf,{system}"


@public
def default_override_file() -> str:
    """``<sys.prefix>/etc/pmca-mca-params-override.conf``."""
    return os.path.join(sys.prefix, "etc", "pmca-mca-params-override.conf")


@attrs.frozen(eq=False, repr=False)
class Raw(FrozenValue):
    """A value given for a name, not yet parsed (the parameter may not exist yet)."""

    value: object
    origin: Origin


class Inputs:
    """Every value given by name, per source, before its parameter exists.

    The environment and API values are taken at construction; the files are
    read by :meth:`read_files` once the two parameters naming them are
    registered (their own values come from the API or the environment only).
    """

    def __init__(
        self,
        environ: Mapping[str, str],
        api: Mapping[str, object],
        param_files: Sequence[str | os.PathLike[str]] | None,
        override_file: str | os.PathLike[str] | None,
    ) -> None:
        self.environ = dict(environ)
        self.pending: dict[Source, dict[str, Raw]] = {source: {} for source in LOOKUP_ORDER}
        self.files_read: list[str] = []
        self.override_read: str | None = None
        for key, value in self.environ.items():
            if key.startswith(ENV_PREFIX) and len(key) > len(ENV_PREFIX):
                self.pending[Source.ENV][key[len(ENV_PREFIX) :]] = Raw(
                    value, Origin(Source.ENV, key)
                )
        for key, given in api.items():
            self.pending[Source.API][str(key)] = Raw(given, Origin(Source.API))
        self._explicit_files: list[str] | None = None
        if param_files is not None:
            self._explicit_files = [os.fspath(path) for path in param_files]
            joined = ",".join(self._explicit_files) if self._explicit_files else "none"
            self.pending[Source.API][PARAM_FILES] = Raw(joined, Origin(Source.API))
        if override_file is not None:
            self.pending[Source.API][OVERRIDE_FILE] = Raw(
                os.fspath(override_file), Origin(Source.API)
            )

    def read_files(self, override: Param, files_param: Param) -> None:
        """Read the override file and the parameter files these two parameters name."""
        path = str(override.value or "").strip()
        if path.lower() not in _DISABLED:
            path = expand_home(path, self.environ)
            entries = self._read_one(path, override)
            if entries is not None:
                self.override_read = path
                for entry in entries:
                    origin = Origin.file(entry.path, entry.lineno, override=True)
                    self.pending[Source.OVERRIDE][entry.key] = Raw(entry.value, origin)

        if self._explicit_files is not None:
            files = self._explicit_files
        else:
            text = str(files_param.value or "").strip()
            files = [] if text.lower() in _DISABLED else text.split(",")
        paths = [expand_home(f.strip(), self.environ) for f in files if f.strip()]
        # Right to left, each file replacing earlier entries: the leftmost wins,
        # and within one file the last line wins (Open MPI's save_value()).
        table = self.pending[Source.FILE]
        read: list[str] = []
        for file_path in reversed(paths):
            entries = self._read_one(file_path, files_param)
            if entries is None:
                continue
            read.append(file_path)
            for entry in entries:
                table[entry.key] = Raw(entry.value, Origin.file(entry.path, entry.lineno))
        self.files_read = list(reversed(read))
        self._warn_core_in_files((files_param, override))

    @staticmethod
    def _read_one(path: str, named_by: Param) -> list[Entry] | None:
        """Parse one file; ``None`` if it is a missing default (skipped silently)."""
        explicit = named_by.origin.source is not Source.DEFAULT
        if not explicit and not os.path.lexists(path):
            return None
        try:
            return parse_param_file(path)
        except ParamFileError as exc:
            # Which parameter named the file, and where that value came from:
            # the file may be one the user never chose (a default, a variable).
            named = f"named by {named_by.full_name} from {named_by.origin}"
            raise ParamFileError(exc.path, exc.lineno, f"{exc.problem} ({named})") from None

    def _warn_core_in_files(self, params: Sequence[Param]) -> None:
        for param in params:
            for name in (param.full_name, *(s.name for s in param.synonyms)):
                for source in (Source.OVERRIDE, Source.FILE):
                    raw = self.pending[source].get(name)
                    if raw is not None:
                        warn_from_caller(
                            ParamWarning(
                                f"MCA parameter {name!r} can only be set from the command line "
                                f"or the environment; ignoring the value from {raw.origin}"
                            )
                        )
