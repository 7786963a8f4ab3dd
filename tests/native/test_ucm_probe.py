"""The libucm probe answers from its cache only while no shared object came or went."""

from __future__ import annotations

from pathlib import Path

import pytest

import pmca.native
from pmca.testing import run_python

PROBE = Path(pmca.native.__file__).with_name("libpmca_probe.so")


@pytest.mark.skipif(not PROBE.exists(), reason="the native libraries were not built")
def test_a_libucm_loaded_or_unloaded_later_is_seen(tmp_path) -> None:
    # Any shared object named like ucm's will do: the probe looks at names.
    fake = tmp_path / "libucm.so.0"
    fake.write_bytes(PROBE.read_bytes())
    child = run_python(
        f"""
        import ctypes, _ctypes
        from pmca.native._ucm import loaded_libucm
        assert loaded_libucm() is None, loaded_libucm()
        assert loaded_libucm() is None  # answered from the cache
        library = ctypes.CDLL({str(fake)!r})
        print(loaded_libucm())
        _ctypes.dlclose(library._handle)
        print(loaded_libucm())
        """
    )
    assert child.returncode == 0, child.stderr
    assert child.stdout.splitlines() == [str(fake), "None"]
