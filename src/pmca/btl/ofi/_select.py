"""Choosing a libfabric provider: hints, then include/exclude, then the first left."""

from __future__ import annotations

from typing import Any

from . import _cdef as c
from ._fabric import Fabric, Libfabric, ProviderList
from ._providers import provider_matches

#: What pmca needs from a provider: reliable unconnected endpoints, tagged
#: messages, one-sided reads and writes, sends delivered in order.
CAPS = c.FI_TAGGED | c.FI_MSG | c.FI_RMA | c.FI_READ | c.FI_WRITE | c.FI_REMOTE_READ
CAPS |= c.FI_REMOTE_WRITE | c.FI_SEND | c.FI_RECV
#: Registration modes pmca handles: virtual or offset addressing, keys chosen
#: by the provider or by pmca. Not FI_MR_LOCAL (pmca sends from unregistered
#: buffers) nor FI_MR_ENDPOINT.
MR_MODE = c.FI_MR_VIRT_ADDR | c.FI_MR_ALLOCATED | c.FI_MR_PROV_KEY


def hints(fi: Libfabric) -> Any:
    """An ``fi_info`` of hints, allocated by libfabric, freed with the returned object."""
    info = fi.ffi.gc(fi.lib.fi_dupinfo(fi.ffi.NULL), fi.lib.fi_freeinfo)
    info.caps = CAPS
    info.mode = c.FI_CONTEXT | c.FI_CONTEXT2
    info.ep_attr.type = c.FI_EP_RDM
    info.domain_attr.mr_mode = MR_MODE
    info.domain_attr.threading = c.FI_THREAD_DOMAIN
    info.domain_attr.data_progress = c.FI_PROGRESS_MANUAL
    info.tx_attr.msg_order = c.FI_ORDER_SAS
    info.rx_attr.msg_order = c.FI_ORDER_SAS
    return info


def offered(fi: Libfabric) -> ProviderList:
    """Every provider entry libfabric offers for pmca's hints."""
    return ProviderList(fi, hints(fi))


def choose_provider(fi: Libfabric, include: list[str], exclude: list[str]) -> Fabric | None:
    """Open the first offered provider that the include/exclude lists allow."""
    providers = offered(fi)
    for name, info in providers.entries:
        if include and not provider_matches(name, include):
            continue
        if exclude and provider_matches(name, exclude):
            continue
        return Fabric(fi, info)
    return None


__all__ = ["CAPS", "MR_MODE", "choose_provider", "hints", "offered"]
