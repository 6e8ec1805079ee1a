"""The quick start's plugin and offline model: a forecast widget, a report file and a payment needing approval."""

from __future__ import annotations

import json

from pydantic import BaseModel, Field

from durable_agent.agent.context import ToolContext
from durable_agent.agent.messages import ModelRequest, ModelResponse, ToolResultMessage
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel, results_since_last_user, text, tool_calls
from durable_agent.agent.tools import Approval, tool


class WeatherInput(BaseModel):
    city: str = Field(description="City name, e.g. Paris")


class ReportInput(BaseModel):
    title: str
    body: str


class PaymentInput(BaseModel):
    to: str = Field(description="Recipient")
    amount: float = Field(gt=0, description="Amount in US dollars")


_FORECASTS = {"paris": (18, "light rain"), "london": (14, "overcast"), "tokyo": (22, "sunny")}


@tool("weather.get", local=True)  # pure and fast: a local activity (README, Performance)
async def get_weather(args: WeatherInput, ctx: ToolContext) -> dict[str, object]:
    """Get today's weather forecast for a city."""
    temperature, sky = _FORECASTS.get(args.city.lower(), (20, "clear"))
    forecast = {"city": args.city, "temperature_c": temperature, "sky": sky}
    ctx.display_widget("forecast", forecast, fallback_text=f"{args.city}: {temperature}°C, {sky}")
    return forecast


@tool("report.write")
async def write_report(args: ReportInput, ctx: ToolContext) -> dict[str, object]:
    """Write a short markdown report and attach it as a file for the user."""
    content = f"# {args.title}\n\n{args.body}\n"
    attached = ctx.add_file(f"{args.title.lower().replace(' ', '-')}.md", content, media_type="text/markdown",
                            summary=f"Markdown report '{args.title}' ({len(content)} characters).")
    return {"file": attached.name, "size": attached.size}


def payment_policy(args: PaymentInput) -> Approval | None:
    if args.amount > 100:
        return Approval(reason=f"Sending ${args.amount:g} requires approval.")
    return None


@tool("payment.send", approval=payment_policy)
async def send_payment(args: PaymentInput, ctx: ToolContext) -> dict[str, object]:
    """Send money to someone. Payments over $100 need a person's approval."""
    ledger = ctx.state.setdefault("payments", [])
    assert isinstance(ledger, list)
    if not any(isinstance(p, dict) and p.get("key") == ctx.idempotency_key for p in ledger):
        ledger.append({"key": ctx.idempotency_key, "to": args.to, "amount": args.amount})
    return {"status": "sent", "to": args.to, "amount": args.amount, "reference": ctx.idempotency_key}


plugin = Plugin(
    "demo",
    tools=[get_weather, write_report, send_payment],
    instructions="You are a helpful assistant. Use the tools to answer; payments over $100 need approval.",
)


def _demo_script(request: ModelRequest) -> ModelResponse:
    """Round 1: forecast + report. Round 2: a $250 payment (needs approval). Then a summary."""
    done = {result.tool: result for result in results_since_last_user(request)}
    if "weather.get" not in done:
        return tool_calls(
            ("weather.get", {"city": "Paris"}),
            ("report.write", {"title": "Paris trip", "body": "Bring an umbrella: light rain expected."}),
            text="Let me check the forecast and write that down.",
        )
    if "payment.send" not in done:
        return tool_calls(("payment.send", {"to": "Hotel du Louvre", "amount": 250}),
                          text="Now paying the hotel deposit.")
    payment = done["payment.send"]
    outcome = f"The payment did not go through ({payment.content})." if payment.is_error else "The deposit is paid."
    return text(f"{_forecast_sentence(done['weather.get'])} I attached your trip report. {outcome}")


def _forecast_sentence(result: ToolResultMessage) -> str:
    """The forecast in words, as a model would say it (the tool returns JSON)."""
    try:
        forecast = json.loads(result.content)
        return f"{forecast['city']} will be {forecast['temperature_c']}°C with {forecast['sky']}."
    except (ValueError, KeyError, TypeError):
        return f"The forecast: {result.content}."


demo_model = ScriptedModel(_demo_script, model="scripted-demo")
