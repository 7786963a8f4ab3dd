"""The parameter file grammar.

One ``key = value`` per line::

    # a comment: '#' (or '//') as the first non-blank character of a line
    btl = self,sm                   # a trailing comment: '#' after a blank
    btl_tcp_if_include = eth#0      # '#' inside a word is part of the value
    mpool_hugepage_page_size = 2m

Rules, chosen to match Open MPI's keyval lexer where it is well defined:

* A line is blank, a comment, or ``key = value``. Comments are whole lines
  whose first non-blank character is ``#`` (or ``//``, which Open MPI also
  accepts), and **trailing comments**: a ``#`` at the start of the value or
  after a blank ends it. Open MPI 5.0.11 reads ``btl_tcp_sndbuf = 5 # note``
  as 5 (its lexer keeps the text, then its number parsing stops at the
  blank); pmca strips the comment for every type, so a string parameter does
  not silently get ``eth0 # note`` either. A ``#`` inside a word (``a#b``)
  stays part of the value, since the grammar has no quoting.
* Whitespace around the key and around the value is stripped; an empty value
  is allowed. Quotes are not special: they become part of the value.
* The key must match ``[A-Za-z_][A-Za-z0-9_]*`` and is used literally (no
  ``PMCA_MCA_`` or ``mca_`` prefix is stripped).
* The value is everything after the *first* ``=``.
* Anything else (no ``=``, an invalid key, ``/* */`` blocks) is a
  :class:`ParamFileError` naming ``path:line`` and the line.
* Files are UTF-8 (a BOM is ignored); ``\\r\\n`` line ends are accepted.
* Only regular files of at most :data:`MAX_FILE_SIZE` bytes are read: a
  FIFO, a device (``/dev/zero``) or a directory is an error at once, never
  a read that blocks or fills memory.
* A key repeated within one file: the last line wins (Open MPI's
  ``save_value`` replaces earlier entries).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..._public import public
from ._errors import ParamFileError

if TYPE_CHECKING:
    from ._entry import Entry

KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

#: The largest parameter file read (Open MPI's are a few kilobytes).
MAX_FILE_SIZE = 1 << 20


@public
def parse_param_file(path: str | os.PathLike[str]) -> list[Entry]:
    """Read and parse one parameter file; raise :class:`ParamFileError` on any problem.

    A missing file raises too: whether that matters is the caller's decision.
    """
    name = os.fspath(path)
    try:
        text = _read_regular_file(name).decode("utf-8-sig")
    except FileNotFoundError:
        raise ParamFileError(name, None, "parameter file not found") from None
    except UnicodeDecodeError as exc:
        raise ParamFileError(name, None, f"not valid UTF-8 ({exc.reason})") from None
    except OSError as exc:
        raise ParamFileError(name, None, f"cannot read parameter file: {exc.strerror}") from None
    return parse_param_text(text, name)


def _read_regular_file(name: str) -> bytes:
    """The bytes of a regular file of at most MAX_FILE_SIZE; never blocks on a FIFO."""
    kind = _not_regular(os.stat(name).st_mode)  # before opening: opening a device acts
    if kind is None:
        # O_NONBLOCK: if a FIFO replaced the file since the stat, open() returns at once.
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as file:
            info = os.fstat(fd)
            kind = _not_regular(info.st_mode)
            if kind is None and info.st_size <= MAX_FILE_SIZE:
                data = file.read(MAX_FILE_SIZE + 1)
                if len(data) <= MAX_FILE_SIZE:
                    return data
    if kind is not None:
        raise ParamFileError(
            name, None, f"cannot read parameter file: it is {kind}, not a regular file"
        )
    raise ParamFileError(
        name, None, f"cannot read parameter file: larger than {MAX_FILE_SIZE} bytes"
    )


def _not_regular(mode: int) -> str | None:
    """What a non-regular file is (for the error), or None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    kinds = (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((what for test, what in kinds if test(mode)), "a special file")


@public
def parse_param_text(text: str, path: str) -> list[Entry]:
    """Parse the contents of a parameter file; ``path`` is only used in entries and errors."""
    from ._entry import Entry

    entries: list[Entry] = []
    # split("\n") rather than splitlines(): line numbers must match what an
    # editor shows, and splitlines() also breaks on \f, \v and U+2028.
    for lineno, line in enumerate(text.split("\n"), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "//")):
            continue
        key, equals, value = stripped.partition("=")
        key = key.strip()
        if not equals:
            raise ParamFileError(path, lineno, f"expected 'key = value', got {line.strip()!r}")
        if not KEY.fullmatch(key):
            problem = "missing key" if not key else f"invalid key {key!r}"
            raise ParamFileError(
                path,
                lineno,
                f"{problem} (keys match [A-Za-z_][A-Za-z0-9_]*) in {line.strip()!r}",
            )
        entries.append(Entry(key, re.sub(_TRAILING_COMMENT, "", value).strip(), path, lineno))
    return entries


#: A ``#`` at the start of the value or after a blank, and the rest of the line
#: (compiled at first use, by ``re``'s cache: most runs read no file).
_TRAILING_COMMENT = r"(?s)(?:^|\s)#.*\Z"


@public
def expand_home(path: str, environ: Mapping[str, str] | None = None) -> str:
    """Expand a leading ``~`` or ``~user``, using ``environ['HOME']`` when given."""
    if environ is not None and (path == "~" or path.startswith("~/")):
        home = environ.get("HOME")
        if home:
            return home + path[1:]
    return os.path.expanduser(path)
