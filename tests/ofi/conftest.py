"""Fixtures for btl/ofi: skips with reasons when libfabric cannot be used here."""

from __future__ import annotations

import pytest

from pmca.scenarios.ompi_13021 import ofi_unavailable


@pytest.fixture
def libfabric() -> None:
    """Skip unless cffi and an MPI wheel's libfabric are installed."""
    missing = ofi_unavailable()
    if missing is not None:
        pytest.skip(missing)
