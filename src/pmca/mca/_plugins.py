"""pluggy's plugin manager, with lookups keyed by component instead of scanned.

pluggy answers ``is_registered``, ``get_name`` and ``get_hookcallers`` by
walking every registered plugin (and every implementation of every hook),
and finds a plugin's hook implementations by reading each attribute of the
instance. With hundreds of components in one framework those walks make an
open quadratic. This manager keeps, per registered component (by identity,
as pmca's components are hashed), its name, its hook callers and its
implementations, and reads the hook markers once per class.
"""

from __future__ import annotations

import inspect
from typing import Any

import pluggy

_Impls = dict[str, pluggy.HookImpl]


class ComponentManager(pluggy.PluginManager):
    """A :class:`pluggy.PluginManager` whose per-plugin lookups cost O(1)."""

    def __init__(self, project_name: str) -> None:
        super().__init__(project_name)
        #: id(plugin) -> (plugin, name, its hook callers, its implementations by hook).
        self._by_id: dict[int, tuple[object, str, list[pluggy.HookCaller], _Impls]] = {}
        #: class -> {attribute: hookimpl options}, read once per class.
        self._markers: dict[type, dict[str, Any]] = {}

    def _class_markers(self, plugin: object) -> dict[str, Any] | None:
        """The hook markers of ``plugin``'s class, if its instances add none of their own."""
        kind = type(plugin)
        if inspect.ismodule(plugin) or isinstance(plugin, type) or hasattr(kind, "__getattr__"):
            return None
        own: dict[str, object] = getattr(plugin, "__dict__", {})
        markers = self._markers.get(kind)
        if markers is None:
            markers = {}
            for name in dir(kind):
                method = getattr(kind, name, None)
                if inspect.isroutine(method):
                    opts = getattr(method, self.project_name + "_impl", None)
                    if isinstance(opts, dict):
                        markers[name] = opts
            self._markers[kind] = markers
        if any(name in markers or inspect.isroutine(value) for name, value in own.items()):
            return None  # the instance shadows or adds methods: read it as pluggy does
        return markers

    def parse_hookimpl_opts(self, plugin: object, name: str) -> Any:
        markers = self._class_markers(plugin)
        if markers is None:
            return super().parse_hookimpl_opts(plugin, name)
        return markers.get(name)

    def register(self, plugin: object, name: str | None = None) -> str | None:
        known = self._by_id.get(id(plugin))
        if known is not None and known[0] is plugin:
            raise ValueError(f"Plugin already registered under the name {known[1]!r}: {plugin}")
        registered = super().register(plugin, name)
        if registered is None:
            return None
        markers = self._class_markers(plugin)
        if markers is None:
            callers = super().get_hookcallers(plugin) or []
        else:
            hooks = dict.fromkeys(opts.get("specname") or attr for attr, opts in markers.items())
            callers = [getattr(self.hook, hook) for hook in hooks]
        impls: _Impls = {}
        for caller in callers:
            # A new implementation goes near the end of the caller's list.
            for impl in reversed(caller.get_hookimpls()):
                if impl.plugin is plugin:
                    impls[caller.name] = impl
                    break
        self._by_id[id(plugin)] = (plugin, registered, callers, impls)
        return registered

    def unregister(self, plugin: object | None = None, name: str | None = None) -> Any | None:
        removed = super().unregister(plugin, name)
        if removed is not None:
            self._by_id.pop(id(removed), None)
        return removed

    def _entry(self, plugin: object) -> tuple[object, str, list[pluggy.HookCaller], _Impls] | None:
        entry = self._by_id.get(id(plugin))
        return entry if entry is not None and entry[0] is plugin else None

    def is_registered(self, plugin: object) -> bool:
        return self._entry(plugin) is not None

    def get_name(self, plugin: object) -> str | None:
        entry = self._entry(plugin)
        return None if entry is None else entry[1]

    def get_hookcallers(self, plugin: object) -> list[pluggy.HookCaller] | None:
        entry = self._entry(plugin)
        return None if entry is None else list(entry[2])

    def implementation(self, plugin: object, hook: str) -> pluggy.HookImpl | None:
        """``plugin``'s implementation of ``hook``, if it is registered and has one."""
        entry = self._entry(plugin)
        return None if entry is None else entry[3].get(hook)
