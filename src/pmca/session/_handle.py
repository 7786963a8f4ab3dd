"""``Session.framework(name)``: the public face of one open framework."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pluggy

from .._public import public

if TYPE_CHECKING:
    from ..mca._component_info import ComponentInfo
    from ..mca._failures import ComponentFailure
    from ..mca._framework import Framework
    from ..mca._open import OpenFramework


@public
class FrameworkHandle:
    """An open framework as its users see it, valid while the session is active.

    ``hook`` calls the framework's own hooks (its ``Framework(interface=...)``
    hookspecs) on the selected components, with pluggy's calling
    conventions: ``session.framework("greet").hook.greeting_styles()``
    returns a list with one result per selected component that implements
    the hook, in selection order: the highest priority first, and a
    ``firstresult`` hook answers for the best component that answers (pluggy's
    ``tryfirst``/``trylast`` aside). Components that were not selected are
    not called.
    """

    __slots__ = ("_check", "_state")

    def __init__(self, state: OpenFramework, check: Callable[[], object]) -> None:
        self._state = state
        #: Raises once the session is no longer active (or the framework closed).
        self._check = check

    def _live(self) -> OpenFramework:
        self._check()
        return self._state

    @property
    def name(self) -> str:
        return self._state.name

    @property
    def declaration(self) -> Framework:
        """The :class:`pmca.Framework` declaration (name, API version, policy, ...)."""
        return self._state.framework

    @property
    def hook(self) -> pluggy.HookRelay:
        """The framework's own hooks, implemented by its selected components."""
        return self._live().hook()

    def modules(self) -> list[object]:
        """The selected modules, best first."""
        return self._live().modules()

    def module(self) -> object:
        """The selected module of a ``single`` framework."""
        return self._live().module()

    def components(self) -> list[ComponentInfo]:
        """The components kept open after selection."""
        return self._live().infos()

    def failures(self) -> list[ComponentFailure]:
        """Components that failed and were skipped, with why."""
        return list(self._live().failures)

    def __repr__(self) -> str:
        return f"<pmca framework {self.name!r}>"
