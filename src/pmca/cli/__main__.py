"""``python -m pmca.cli``: the ``pmca`` console script."""

from __future__ import annotations

from . import main

raise SystemExit(main())
