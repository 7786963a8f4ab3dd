"""pluggy's plugin manager, with lookups keyed by component instead of scanned.

pluggy answers ``is_registered``, ``get_name`` and ``get_hookcallers`` by
walking every registered plugin (and every implementation of every hook),
and finds a plugin's hook implementations by reading each attribute of the
instance. With hundreds of components in one framework those walks make an
open quadratic. This manager keeps, per registered component (by identity,
as pmca's components are hashed), its name, its hook callers and its
implementations, and reads the hook markers once per class.

A component can also be registered *detached*: validated against the hook
specifications and callable through :meth:`ComponentManager.implementation`,
but not yet in any hook caller. An open framework registers its components
so and attaches only those it selects: the ones it closes unselected never
enter (or leave) the hook callers' lists, which pluggy inserts into and
removes from by scanning them.
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Sequence
from types import FunctionType, MethodType, ModuleType
from typing import Any

import pluggy

from ._component import describe
from ._names import close_matches

_Impls = dict[str, pluggy.HookImpl]

#: Hook markers per class and project, read from the first instance registered.
_IMPL_MARKERS: weakref.WeakKeyDictionary[type, dict[str, dict[str, Any]]] = (
    weakref.WeakKeyDictionary()
)
#: Hook specifications per interface (class or module) and project.
_SPEC_MARKERS: weakref.WeakKeyDictionary[object, dict[str, dict[str, Any]]] = (
    weakref.WeakKeyDictionary()
)


def _markers_in(kind: type, attribute: str) -> dict[str, Any]:
    """The hook implementations ``kind`` defines or inherits, with their options.

    What pluggy finds attribute by attribute with :func:`inspect.getattr_static`,
    read in one walk over the class dictionaries along the MRO (the first
    definition of a name hides the later ones): each new component class
    costs its own attributes, not a static lookup per name.
    """
    found: dict[str, Any] = {}
    seen: set[str] = set()
    for klass in kind.__mro__:
        for name, value in vars(klass).items():
            if name in seen:
                continue
            seen.add(name)
            if type(value) is MethodType:
                value = value.__func__
            elif not isinstance(value, (FunctionType, staticmethod, classmethod)):
                continue
            opts = getattr(value, attribute, None)
            if opts is None:
                opts = getattr(getattr(value, "__func__", None), attribute, None)
            if isinstance(opts, dict):
                found[name] = opts
    return found


class ComponentManager(pluggy.PluginManager):
    """A :class:`pluggy.PluginManager` whose per-plugin lookups cost O(1)."""

    def __init__(self, project_name: str) -> None:
        super().__init__(project_name)
        #: id(plugin) -> (plugin, name, its hook callers, its implementations by hook).
        self._by_id: dict[int, tuple[object, str, list[pluggy.HookCaller], _Impls]] = {}
        #: The plugin being registered and its class's markers (``None``: read it as pluggy does).
        self._registering: tuple[object, dict[str, Any] | None] = (None, None)
        #: id(plugin) of the plugins registered detached, and the names they hold.
        self._detached: dict[int, str] = {}
        self._detached_names: set[str] = set()

    def _class_markers(self, plugin: object) -> dict[str, Any] | None:
        """The hook markers of ``plugin``'s class, if the instance adds or hides none."""
        own = getattr(plugin, "__dict__", None)
        if isinstance(plugin, (type, ModuleType)) or not isinstance(own, dict):
            return None
        if any(inspect.isroutine(value) for value in own.values()):
            return None  # the instance adds methods of its own: read it as pluggy does
        kind = type(plugin)
        projects = _IMPL_MARKERS.setdefault(kind, {})
        markers = projects.get(self.project_name)
        if markers is None:
            markers = projects[self.project_name] = _markers_in(kind, self.project_name + "_impl")
        return None if own.keys() & markers.keys() else markers

    def parse_hookimpl_opts(self, plugin: object, name: str) -> Any:
        current, markers = self._registering
        if current is plugin and markers is not None:
            return markers.get(name)
        return super().parse_hookimpl_opts(plugin, name)

    def parse_hookspec_opts(self, module_or_class: Any, name: str) -> Any:
        try:
            specs = _SPEC_MARKERS.setdefault(module_or_class, {})
        except TypeError:  # cannot be weakly referenced
            return super().parse_hookspec_opts(module_or_class, name)
        cached = specs.setdefault(self.project_name, {})
        if name not in cached:
            cached[name] = super().parse_hookspec_opts(module_or_class, name)
        return cached[name]

    def register(self, plugin: object, name: str | None = None) -> str | None:
        known = self._by_id.get(id(plugin))
        if known is not None and known[0] is plugin:
            raise ValueError(f"Plugin already registered under the name {known[1]!r}: {plugin}")
        markers = self._class_markers(plugin)
        self._registering = (plugin, markers)
        try:
            registered = super().register(plugin, name)
        finally:
            self._registering = (None, None)
        if registered is None:
            return None
        if markers is None:
            # Scanned, as pluggy does (its get_hookcallers would ask this
            # manager's get_name, which knows the plugin only once registered).
            callers = [
                caller
                for caller in vars(self.hook).values()
                if isinstance(caller, pluggy.HookCaller)
                and any(impl.plugin is plugin for impl in caller.get_hookimpls())
            ]
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

    def register_detached(self, plugin: object, name: str) -> str | None:
        """Register ``plugin`` under ``name`` outside every hook caller until :meth:`attach`.

        Validation is pluggy's, now: an implementation that does not match
        its hook's specification raises here. A plugin whose hooks pmca does
        not read from its class (a module, a class, an instance with methods
        of its own) is registered attached, as :meth:`register` does.
        """
        known = self._entry(plugin)
        if known is not None:
            raise ValueError(f"Plugin already registered under the name {known[1]!r}: {plugin}")
        markers = self._class_markers(plugin)
        if markers is None:
            return self.register(plugin, name)
        if name in self._name2plugin and self._name2plugin[name] is None:
            return None  # a blocked name, as pluggy answers
        if name in self._name2plugin or name in self._detached_names:
            raise ValueError(f"Plugin name already registered: {name}={plugin}")
        impls: _Impls = {}
        for attribute, opts in markers.items():
            hook_name = opts.get("specname") or attribute
            impl = pluggy.HookImpl(plugin, name, getattr(plugin, attribute), opts)
            hook: pluggy.HookCaller | None = getattr(self.hook, hook_name, None)
            if hook is not None and hook.has_spec():
                self._verify_hook(hook, impl)
            impls[hook_name] = impl
        self._by_id[id(plugin)] = (plugin, name, [], impls)
        self._detached[id(plugin)] = name
        self._detached_names.add(name)
        return name

    def check_known(self, plugin: object, framework: str) -> None:
        """pluggy's :meth:`~pluggy.PluginManager.check_pending`, for one plugin.

        An implementation of a hook that has no specification (a misspelled
        ``qurey``) would otherwise never be called, silently. Raises
        :class:`pluggy.PluginValidationError` naming the plugin, ``framework``
        and the closest hook name; ``optionalhook=True`` is exempt, as in pluggy.
        """
        entry = self._entry(plugin)
        if entry is None:
            return
        known = sorted(
            name
            for name, caller in vars(self.hook).items()
            if isinstance(caller, pluggy.HookCaller) and caller.has_spec()
        )
        for hook_name, impl in entry[3].items():
            if hook_name in known or impl.optionalhook:
                continue
            close = close_matches(hook_name, known, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"its hooks: {', '.join(known)}"
            raise pluggy.PluginValidationError(
                plugin,
                f"component {describe(plugin)} implements {hook_name!r}, which is not a hook "
                f"of framework {framework!r} ({hint})",
            )

    def _forget_detached(self, plugin: object) -> None:
        self._detached_names.discard(self._detached.pop(id(plugin)))

    def attach(self, plugin: object) -> None:
        """Put a plugin registered detached into its hooks' callers (pluggy's order: last first).

        See :meth:`attach_in_order` for attaching several in a chosen call order.
        """
        entry = self._entry(plugin)
        if entry is None or id(plugin) not in self._detached:
            return
        _, name, callers, impls = entry
        self._forget_detached(plugin)
        self._name2plugin[name] = plugin
        for hook_name, impl in impls.items():
            hook: pluggy.HookCaller | None = getattr(self.hook, hook_name, None)
            if hook is None:
                hook = pluggy.HookCaller(hook_name, self._hookexec)
                setattr(self.hook, hook_name, hook)
            hook._maybe_apply_history(impl)
            hook._add_hookimpl(impl)
            callers.append(hook)

    def attach_in_order(self, plugins: Sequence[object]) -> None:
        """Make ``plugins`` the hooks' implementations, called first to last as given.

        pluggy calls the implementation registered last first (``tryfirst``
        and ``trylast`` aside), so the plugins go into the callers in reverse:
        the first of ``plugins`` ends up called first. A plugin registered
        attached (one whose hooks pmca does not read from its class) already
        sits in its callers in registration order: it is moved, so that the
        order holds for it too.
        """
        for plugin in reversed(plugins):
            entry = self._entry(plugin)
            if entry is None:
                continue
            if id(plugin) in self._detached:
                self.attach(plugin)
                continue
            _, _, callers, impls = entry
            for caller in callers:
                impl = impls.get(caller.name)
                if impl is not None:
                    caller._remove_plugin(plugin)
                    caller._add_hookimpl(impl)

    def unregister(self, plugin: object | None = None, name: str | None = None) -> Any | None:
        if plugin is not None and self._entry(plugin) is not None and id(plugin) in self._detached:
            self._forget_detached(plugin)
            del self._by_id[id(plugin)]
            return plugin
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
