"""``python -m pmca``: the ``pmca`` command (``pmca info``, ``pmca doctor``, ...)."""

from __future__ import annotations

from .cli import main

raise SystemExit(main())
