"""An example pmca distribution: a new framework and a component for it.

The ``greet`` framework keeps every available component (``multi``), best
priority first; each module answers ``greet(name)``.
"""

from __future__ import annotations

import pmca


class GreetSpec:
    """The greet framework's own hook: every selected component may answer, the
    highest priority first (pmca calls a framework's hooks in selection order)."""

    @pmca.hookspec
    def greeting_styles(self) -> list[str]:  # type: ignore[empty-body]
        """Names of the greeting styles a component offers."""


FRAMEWORK = pmca.Framework(
    name="greet",
    description="example framework: ways of greeting someone",
    api_version="1.0.0",
    interface=GreetSpec,
    policy="multi",
)


class HelloModule:
    def __init__(self, greeting: str) -> None:
        self.greeting = greeting

    def greet(self, name: str) -> str:
        return f"{self.greeting}, {name}"


class HelloComponent(pmca.Component):
    framework = "greet"
    name = "hello"
    version = "1.2.0"
    api_version = "1.0.0"

    @pmca.hookimpl
    def register(self, params: pmca.ComponentParams) -> None:
        params.register("greeting", type=str, default="hi", help="What to say first", level=1)
        params.register("priority", type=int, default=20, help="Selection priority", level=5)

    @pmca.hookimpl
    def query(self, ctx: pmca.ComponentContext) -> pmca.Query:
        return pmca.Query(
            priority=ctx.params["priority"], module=HelloModule(ctx.params["greeting"])
        )

    @pmca.hookimpl
    def greeting_styles(self) -> list[str]:
        return ["plain"]
