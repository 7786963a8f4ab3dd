"""Open MPI's ``sessions_init_twice``, in pmca.

Two complete session lifetimes in one process: the second init happens after
the last finalize has torn everything down, so it must rebuild the parameter
space, reselect every component and reinstall the memory hooks. Each round
checks that a real ``munmap`` reaches a release callback.

Run it in either load mode::

    python examples/sessions_init_twice.py
    PMCA_MCA_mca_base_component_dso=all python examples/sessions_init_twice.py
"""

from __future__ import annotations

import mmap
import sys

import pmca


def one_round(number: int) -> bool:
    with pmca.Session() as session:
        memory = session.components("memory")
        patcher = session.components("patcher") if "patcher" in _open_frameworks() else []
        released: list[tuple[int, int, str]] = []

        def on_release(address: int, length: int, kind: str, from_alloc: bool) -> None:
            released.append((address, length, kind))

        support = pmca.memory.support_level()
        delivered = False
        try:
            handle = pmca.memory.register_release(on_release)
        except pmca.memory.MemoryHooksUnavailable as why:
            print(f"round {number}: no memory hooks here ({why})")
        else:
            support = pmca.memory.support_level()
            region = mmap.mmap(-1, 1 << 20)
            region.close()  # munmap
            pmca.memory.drain()
            handle.unregister()
            delivered = any(kind == "munmap" and length >= 1 << 20 for _, length, kind in released)
        print(
            f"round {number}: memory={[c.name + ' (' + c.load_mode + ')' for c in memory]} "
            f"patcher={[c.name + ' (' + c.load_mode + ')' for c in patcher]} "
            f"support={support!r} munmap delivered={delivered}"
        )
        return delivered or not support


def _open_frameworks() -> list[str]:
    from pmca.runtime import RUNTIME

    return list(RUNTIME.frameworks)


def main() -> int:
    ok = all([one_round(1), one_round(2)])
    print("sessions_init_twice:", "OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
