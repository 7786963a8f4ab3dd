"""Fixtures for the rcache tests: real sessions, real hooks, real mappings."""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from typing import Any

import pytest

import pmca
import pmca.native as native
from pmca._libc import MADV_DONTNEED, PAGE, libc
from pmca.rcache import RegistrationCache, UnpinnedBackend

needs_native = pytest.mark.skipif(
    not native.available(), reason=f"native hook backend unavailable: {native.unavailable_reason()}"
)


class Pool:
    """A private anonymous mapping of ``pages`` pages that tests register and release."""

    def __init__(self, pages: int) -> None:
        self.pages = pages
        self.base = libc().map_anonymous(pages * PAGE)
        libc().touch(self.base, pages * PAGE)

    def page(self, number: int) -> int:
        return self.base + number * PAGE

    def release(self, first: int, count: int) -> None:
        """madvise(MADV_DONTNEED) pages: a real release event, the mapping stays."""
        if libc().madvise(self.page(first), count * PAGE, MADV_DONTNEED) != 0:
            raise OSError(ctypes.get_errno(), "madvise failed")

    def close(self) -> None:
        libc().munmap(self.base, self.pages * PAGE)


@pytest.fixture
def session(pmca_env: dict[str, str]) -> Iterator[pmca.Session]:
    with pmca.Session() as live:
        yield live


@pytest.fixture
def pool() -> Iterator[Pool]:
    mapped = Pool(64)
    yield mapped
    mapped.close()


@pytest.fixture
def backend() -> UnpinnedBackend:
    return UnpinnedBackend()


@pytest.fixture
def cache(session: pmca.Session, backend: UnpinnedBackend) -> Iterator[Any]:
    # In dso mode grdma's modules are imported afresh: check the protocol, not the class.
    rc = pmca.rcache.create("grdma", backend, leave_pinned=True, cache_max_bytes=0)
    assert isinstance(rc, RegistrationCache) and rc.name == "grdma"
    yield rc
    rc.close()
