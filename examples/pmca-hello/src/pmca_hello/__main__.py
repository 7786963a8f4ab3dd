"""``python -m pmca_hello [NAME]``: open the greet framework and use it.

Shows the two ways a framework is used: its selected modules
(``session.modules``) and its own hooks (``session.framework(...).hook``).
"""

from __future__ import annotations

import sys

import pmca


def main(argv: list[str]) -> int:
    name = argv[0] if argv else "world"
    with pmca.Session(frameworks=["greet"]) as session:
        for module in session.modules("greet"):
            print(module.greet(name))
        greet = session.framework("greet")
        styles = sorted(style for answer in greet.hook.greeting_styles() for style in answer)
        print("styles:", ", ".join(styles))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
