"""pmca's parameter space [Open MPI: MCA variables, ``mca_base_var``].

Typed, documented settings registered by frameworks and components, with
values from (highest first) the override file, the API/command line, the
environment (``PMCA_MCA_<name>``), parameter files and defaults; every value
knows where it came from.
"""

from __future__ import annotations

from ..._lazy import lazy_attributes
from ._dump import format_parsable, format_readable
from ._errors import (
    ParamError,
    ParamFileError,
    ParamPermissionError,
    ParamRegistrationError,
    ParamValueError,
    ParamWarning,
    PmcaDeprecationWarning,
    UnknownParamError,
)
from ._inputs import (
    ENV_PREFIX,
    OVERRIDE_FILE,
    PARAM_FILES,
    default_override_file,
    default_param_files,
)
from ._param import Param, Synonym
from ._paramfile import expand_home, parse_param_file, parse_param_text
from ._space import ParamSpace
from ._values import (
    AUTO_BOOL,
    BOOL_ENUM,
    VERBOSITY,
    Enumeration,
    InfoLevel,
    InvalidValue,
    Origin,
    ParamType,
    Source,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing for it
if TYPE_CHECKING:
    from ._checks import MAX_TIMEOUT, a_path, one_of, power_of_two, within
    from ._entry import Entry

__all__ = [
    "AUTO_BOOL",
    "BOOL_ENUM",
    "ENV_PREFIX",
    "MAX_TIMEOUT",
    "OVERRIDE_FILE",
    "PARAM_FILES",
    "VERBOSITY",
    "Entry",
    "Enumeration",
    "InfoLevel",
    "InvalidValue",
    "Origin",
    "Param",
    "ParamError",
    "ParamFileError",
    "ParamPermissionError",
    "ParamRegistrationError",
    "ParamSpace",
    "ParamType",
    "ParamValueError",
    "ParamWarning",
    "PmcaDeprecationWarning",
    "Source",
    "Synonym",
    "UnknownParamError",
    "a_path",
    "default_override_file",
    "default_param_files",
    "expand_home",
    "format_parsable",
    "format_readable",
    "one_of",
    "parse_param_file",
    "parse_param_text",
    "power_of_two",
    "within",
]

# A parameter file's lines, built when a file is read: most sessions read none;
# the ready-made checks, when a component registers a bounded parameter.
_TARGETS = {
    "MAX_TIMEOUT": "._checks:MAX_TIMEOUT",
    "a_path": "._checks:a_path",
    "Entry": "._entry:Entry",
    "one_of": "._checks:one_of",
    "power_of_two": "._checks:power_of_two",
    "within": "._checks:within",
}
if not TYPE_CHECKING:  # mypy sees the imports above, and no catch-all
    __getattr__, __dir__ = lazy_attributes(__name__, _TARGETS)
