"""A second greet component, loud."""

from __future__ import annotations

import pmca


class ShoutModule:
    def greet(self, name: str) -> str:
        return f"HEY, {name.upper()}!"


class ShoutComponent(pmca.Component):
    framework = "greet"
    name = "shout"
    version = "1.2.0"
    api_version = "1.0.0"

    @pmca.hookimpl
    def register(self, params: pmca.ComponentParams) -> None:
        params.register("priority", type=int, default=10, help="Selection priority", level=5)

    @pmca.hookimpl
    def query(self, ctx: pmca.ComponentContext) -> pmca.Query:
        return pmca.Query(priority=ctx.params["priority"], module=ShoutModule())

    @pmca.hookimpl
    def greeting_styles(self) -> list[str]:
        return ["loud"]
