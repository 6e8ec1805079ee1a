"""Widgets: rich, display-only output for a UI.

A worked example of `ctx.display_widget(...)`. `chart.show` puts a `widget` output (name `chart`, the points
as data, and a plain-text fallback for UIs that cannot draw) right after the tool's own entry. Widgets are
never sent to the model: it sees only the short text summary the tool returns.

Load it with `DAGENT_PLUGINS=durable_agent.plugins.widgets:plugin`.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from durable_agent.agent.context import ToolContext
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.tools import tool

FinitePoint = Annotated[float, Field(allow_inf_nan=False)]


class ChartInput(BaseModel):
    title: str = Field(min_length=1, max_length=200)
    points: list[FinitePoint] = Field(min_length=1, max_length=10_000, description="The y values, in order")


def fallback_text(title: str, points: list[float]) -> str:
    return f"{title}: " + ", ".join(f"{p:g}" for p in points)


@tool("chart.show", local=True)  # pure and fast: a local activity (README, Performance)
async def show_chart(args: ChartInput, ctx: ToolContext) -> str:
    """Show the user a line chart of a series of numbers."""
    ctx.display_widget("chart", {"title": args.title, "points": args.points},
                       fallback_text=fallback_text(args.title, args.points))
    return f"Displayed a chart titled {args.title!r} with {len(args.points)} points to the user."


plugin = Plugin("widgets", tools=[show_chart],
                instructions="Use chart.show to show the user a series of numbers as a chart.")
