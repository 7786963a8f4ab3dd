"""Naming libfabric providers in ``btl_ofi_provider_include``/``_exclude``."""

from __future__ import annotations

from ..._public import public

__all__ = ["provider_matches"]


@public
def provider_matches(provider: str, items: list[str]) -> bool:
    """Whether ``provider`` (``tcp;ofi_rxm``) is named by one of ``items``."""
    layers = provider.split(";")
    return any(item == provider or item in layers for item in items)
