"""What a btl component declares when it registers: API version, :class:`Flags`, :class:`Limits`.

Apart from the rest of the module interface (:mod:`pmca.btl._interface`) so
that registering the btl components (``pmca info``, a session that never
queries them) does not create the interface's records and protocols.
"""

from __future__ import annotations

import enum

from attrs import frozen

from .._public import public
from .._records import FrozenValue

#: The btl framework API (the module interface's version).
API_VERSION = "1.0.0"


@public
class Flags(enum.IntFlag):
    """What a module can do (Open MPI's ``MCA_BTL_FLAGS_*``)."""

    NONE = 0
    #: Active-message sends: :meth:`BtlModule.send` and :meth:`BtlModule.sendi`.
    SEND = 0x1
    #: One-sided writes into a peer's registered memory: :meth:`BtlModule.put`.
    PUT = 0x2
    #: One-sided reads from a peer's registered memory: :meth:`BtlModule.get`.
    GET = 0x4
    #: ``send`` transmits from the caller's buffers without copying them first.
    SEND_INPLACE = 0x8
    #: Memory must be registered (:meth:`BtlModule.register_mem`) before put/get.
    REGISTRATION_REQUIRED = 0x10
    #: put/get work on memory of any process the module reaches, single copy.
    SINGLE_COPY = 0x20
    RDMA = PUT | GET


#: Reserved active-message tags (Open MPI's ``MCA_BTL_TAG_*``). Tags are
#: ``0..255``; the message layer takes ``TAG_P2P_FIRST..TAG_P2P_LAST``, pmca's
#: own checks (``pmca doctor``) use ``TAG_DOCTOR``, and ``TAG_USER`` upward is
#: free for tools built on pmca.
TAG_P2P_FIRST = 0x10
TAG_P2P_LAST = 0x1F
TAG_DOCTOR = 0x20
TAG_USER = 0x40
TAG_MAX = 0xFF


@public
@frozen(eq=False, repr=False)
class Limits(FrozenValue):
    """A module's performance attributes, as the component's parameters set them.

    Names and units follow Open MPI's ``btl_<component>_*`` parameters.

    :param exclusivity: higher wins: when several modules reach a peer, those
        with lower exclusivity than the best are dropped for that peer
        (``self`` > ``sm`` > ``tcp``).
    :param latency: in microseconds; orders modules of equal exclusivity.
    :param bandwidth: in Mbit/s; weights the striping of large messages.
    :param eager_limit: the largest message (payload plus the message layer's
        header) sent in one active message without a handshake.
    :param rndv_eager_limit: the size of the first fragment sent with a
        rendezvous request (``0``: none).
    :param max_send_size: the largest single ``send`` the module accepts.
    :param flags: :class:`Flags`.
    :param put_limit: the largest single ``put`` (``0``: no put).
    :param get_limit: the largest single ``get`` (``0``: no get).
    """

    exclusivity: int
    latency: int
    bandwidth: int
    eager_limit: int
    rndv_eager_limit: int
    max_send_size: int
    flags: Flags
    put_limit: int = 0
    get_limit: int = 0


__all__ = [
    "API_VERSION",
    "TAG_DOCTOR",
    "TAG_MAX",
    "TAG_P2P_FIRST",
    "TAG_P2P_LAST",
    "TAG_USER",
    "Flags",
    "Limits",
]
