"""Skills: groups of tools the model switches on and off mid-conversation.

A worked example of a plugin whose tools change from round to round. The model always sees two tools,
`skill.activate {"skill"}` and `skill.deactivate {"skill"}`; they write the set of active skills into the
plugin's state (`ctx.state["active"]`). Before every model call `prepare` reads that state back and offers
the tools of the active skills, plus a context item saying which skills exist and which are on. So a skill
activated in round 1 is callable from round 2 on, and the state travels with the prompt (and with the
conversation), surviving worker crashes like everything else in the record.

Use it with your own tools::

    from durable_agent.plugins.skills import SkillsPlugin
    plugin = SkillsPlugin({"billing": [refund, invoice], "crm": [lookup_customer]})

or load the demo with `DAGENT_PLUGINS=durable_agent.plugins.skills:plugin`.

`tools` (the catalogue the worker searches when it runs a call) lists every tool of every skill, even
those not offered this round: a call planned while a skill was active still runs after a deactivation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

from durable_agent.agent.context import ToolContext
from durable_agent.agent.plugins import Plugin, PrepareContext
from durable_agent.agent.tools import Tool, tool

ACTIVATE = "skill.activate"
DEACTIVATE = "skill.deactivate"


class SkillInput(BaseModel):
    skill: str = Field(description="The name of the skill.")


def active_skills(state: Mapping[str, Any]) -> list[str]:
    """The active skill names stored in a plugin state (tolerant of a missing or malformed entry)."""
    active = state.get("active")
    return [name for name in active if isinstance(name, str)] if isinstance(active, list) else []


class SkillsPlugin(Plugin):
    """Offers `skill.activate` / `skill.deactivate` and the tools of the active skills.

    `skills` maps a skill name to its tools; `descriptions` optionally says what each skill is for.
    """

    def __init__(self, skills: Mapping[str, Sequence[Tool[Any]]], *, name: str = "skills",
                 descriptions: Mapping[str, str] | None = None) -> None:
        if not skills:
            raise ValueError("SkillsPlugin needs at least one skill")
        self.skills: dict[str, tuple[Tool[Any], ...]] = {skill: tuple(tools) for skill, tools in skills.items()}
        self.descriptions = dict(descriptions or {})
        seen: dict[str, str] = {}
        for skill, tools in self.skills.items():
            for t in tools:
                if t.id in (ACTIVATE, DEACTIVATE) or t.id in seen:
                    owner = seen.get(t.id, "this plugin")
                    raise ValueError(f"skill {skill!r}: tool id {t.id!r} is already used by {owner}")
                seen[t.id] = f"skill {skill!r}"
        self.activate_tool, self.deactivate_tool = self._control_tools()
        catalogue = [self.activate_tool, self.deactivate_tool, *(t for ts in self.skills.values() for t in ts)]
        super().__init__(name, tools=catalogue)

    def _known(self, skill: str) -> str:
        if skill not in self.skills:
            raise ValueError(f"Unknown skill {skill!r}. Available skills: {', '.join(sorted(self.skills))}.")
        return skill

    def _control_tools(self) -> tuple[Tool[Any], Tool[Any]]:
        names = ", ".join(sorted(self.skills))

        @tool(ACTIVATE, description=f"Activate a skill to get its tools on your next turn. Skills: {names}.")
        async def activate(args: SkillInput, ctx: ToolContext) -> str:
            skill = self._known(args.skill)
            active = active_skills(ctx.state)
            if skill in active:
                return f"Skill {skill!r} is already active."
            ctx.state["active"] = sorted([*active, skill])
            tools = ", ".join(t.id for t in self.skills[skill]) or "none"
            return f"Skill {skill!r} activated. Its tools ({tools}) are available from your next turn."

        @tool(DEACTIVATE, description=f"Deactivate a skill and remove its tools. Skills: {names}.")
        async def deactivate(args: SkillInput, ctx: ToolContext) -> str:
            skill = self._known(args.skill)
            active = active_skills(ctx.state)
            if skill not in active:
                return f"Skill {skill!r} was not active."
            ctx.state["active"] = [s for s in active if s != skill]
            return f"Skill {skill!r} deactivated."

        return activate, deactivate

    async def prepare(self, ctx: PrepareContext) -> None:
        ctx.add_tool(self.activate_tool)
        ctx.add_tool(self.deactivate_tool)
        active = [skill for skill in active_skills(ctx.state) if skill in self.skills]
        for skill in active:
            for t in self.skills[skill]:
                ctx.add_tool(t)
        catalogue = "; ".join(
            f"{skill}{' (' + self.descriptions[skill] + ')' if skill in self.descriptions else ''}: "
            f"{', '.join(t.id for t in tools)}"
            for skill, tools in sorted(self.skills.items())
        )
        ctx.add_context(
            f"Skills available: {catalogue}. Active skills: {', '.join(active) or 'none'}. "
            f"Call {ACTIVATE} to use a skill's tools (they appear on your next turn) and {DEACTIVATE} "
            "when you no longer need them."
        )


# --- the demo: two small skills -------------------------------------------------------------------


class EmailInput(BaseModel):
    to: str = Field(description="Recipient address")
    subject: str
    body: str = ""


class EventInput(BaseModel):
    title: str
    date: str = Field(description="ISO date, e.g. 2025-06-01")


@tool("email.send")
async def send_email(args: EmailInput, ctx: ToolContext) -> dict[str, object]:
    """Send an email (demo: nothing leaves the machine)."""
    return {"status": "sent", "to": args.to, "subject": args.subject, "message_id": ctx.idempotency_key}


@tool("calendar.add")
async def add_event(args: EventInput, ctx: ToolContext) -> dict[str, object]:
    """Add an event to the user's calendar (demo: nothing is stored)."""
    return {"status": "added", "title": args.title, "date": args.date, "event_id": ctx.idempotency_key}


plugin = SkillsPlugin(
    {"email": [send_email], "calendar": [add_event]},
    descriptions={"email": "send emails", "calendar": "manage the user's calendar"},
)
