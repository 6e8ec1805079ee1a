"""The model round activity: the transcript, the plugins' context, one model call (streamed to the heartbeat
when the provider streams), fallback along the model chain, and the tool calls planned."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, Literal

from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from durable_agent.activities import telemetry
from durable_agent.activities.heartbeats import LiveDetails, bound_log, heartbeating, payload_codec
from durable_agent.activities.history import read_history_link
from durable_agent.activities.planning import plan_call
from durable_agent.activities.runtime import PreparedRound, RuntimeActivities
from durable_agent.activities.transcripts import HistoryBroken, Transcript, TranscriptMissing
from durable_agent.agent.context_window import ContextLimit, trim_messages
from durable_agent.agent.errors import PluginPrepareError
from durable_agent.agent.messages import ModelRequest, ModelResponse, ToolSpec
from durable_agent.agent.model_settings import ModelSettings
from durable_agent.agent.models import Prompt
from durable_agent.agent.output_schema import OutputSchema
from durable_agent.agent.projection import project_input
from durable_agent.agent.providers.base import FatalModelError, ModelProvider, RetryableModelError
from durable_agent.workflows import names
from durable_agent.workflows.names import MODEL_ROUND_ACTIVITY
from durable_agent.workflows.protocol import (
    FinalAnswer,
    HistoryLink,
    NextStep,
    RetryForSchema,
    RoundInput,
    RoundResult,
    RunTools,
    StreamingText,
    TextDelta,
)

LIVE_TEXT_TAIL_CHARS = 16_000  # streamed text kept in heartbeat details (watchers joining late see this much)
LIVE_TEXT_EVERY_SECONDS = 0.2  # how often the streamed text so far is handed to the heartbeat details
NO_INPUT_MESSAGE = "(This prompt was started by the system; there is no user message.)"
UNBOUNDED_LOCAL_CALLS = (
    "model calls run here as local activities (a client set DAGENT_MODEL_CALLS=local), but this worker runs more "
    "workflow tasks at once than half the prompts it caches: start it with DAGENT_MODEL_CALLS=local too (it then "
    "runs half as many), or set DAGENT_MAX_WORKFLOW_TASKS to at most half of DAGENT_MAX_CACHED_WORKFLOWS; "
    "otherwise, with more prompts at once than its cache holds, workflow tasks time out (10 s each)")


class ModelRoundActivity(RuntimeActivities):
    """`dagent.model_round`: one round's model call."""

    _said_unbounded = False  # UNBOUNDED_LOCAL_CALLS was logged by this worker

    async def _load_link(self, ref: str) -> HistoryLink:
        return await read_history_link(self.runtime.file_store, ref, payload_codec())

    async def _transcript(self, inp: RoundInput, logger: Any) -> Transcript:
        """The earlier prompts and outputs: from the input, this worker's cache and the store; never a query."""
        try:
            return await self.transcripts.load(activity.info().workflow_id or "", inp, self._load_link)
        except TranscriptMissing as exc:
            logger.info("transcript not cached here, asking for it whole", reason=str(exc))
            raise ApplicationError(str(exc), type=names.TRANSCRIPT_MISSING_ERROR, non_retryable=True,
                                   category=ApplicationErrorCategory.BENIGN) from exc  # expected: no traceback
        except HistoryBroken as exc:
            logger.error("conversation history missing", error=str(exc))
            raise ApplicationError(str(exc), type=names.HISTORY_MISSING_ERROR, non_retryable=True) from exc

    @activity.defn(name=MODEL_ROUND_ACTIVITY)
    async def model_round(self, inp: RoundInput) -> RoundResult:
        """One round's model call. It heartbeats from its first moment to its last (history loading, plugins'
        `prepare`, the provider call), so a worker that dies anywhere in it is noticed within the model
        activity's heartbeat timeout (seconds) and another worker retries the call, not after 5 minutes."""
        live = LiveDetails()
        async with heartbeating(live, self.runtime.live_every):
            return await self._model_round(inp, live)

    async def _model_round(self, inp: RoundInput, live: LiveDetails) -> RoundResult:
        logger = bound_log(prompt_id=inp.prompt.id, round=inp.round, tier=inp.prompt.model)
        if activity.info().is_local and not self.runtime.fits_local_model_calls and not self._said_unbounded:
            self._said_unbounded = True  # once per worker
            logger.warning(UNBOUNDED_LOCAL_CALLS)
        transcript = await self._transcript(inp, logger)
        prompt = inp.prompt.model_copy(update={"output": transcript.outputs})
        prepared = await self._prepare(inp, prompt, logger)
        schema = _output_schema(inp)
        request = await self._request(inp, prompt, transcript, prepared, schema)
        response, provider, position = await self._answer(inp, prompt, request, live, logger)
        return self._plan(response, provider, position, request, prepared, schema)

    async def _prepare(self, inp: RoundInput, prompt: Prompt, logger: Any) -> PreparedRound:
        """The plugins' `prepare`: tools, context and state for this round."""
        try:
            return await self.runtime.prepare(prompt, inp.round, only=inp.plugins)
        except PluginPrepareError as exc:
            logger.error("plugin prepare failed", error=str(exc))
            raise ApplicationError(str(exc), type=names.PLUGIN_PREPARE_ERROR, non_retryable=True) from exc

    async def _request(self, inp: RoundInput, prompt: Prompt, transcript: Transcript, prepared: PreparedRound,
                       schema: OutputSchema | None) -> ModelRequest:
        """The model request: instructions, the projected (and trimmed) messages, tools; plugins' `before_model`."""
        instructions = "\n\n".join(part for part in [inp.instructions or "", *prepared.context,
                                                       schema.instruction() if schema else ""] if part)
        # = project_prompts(history, prompt), from the projections the transcript cache kept. A system-initiated
        # prompt has no user message; a neutral one keeps every provider's turn order valid.
        messages = [*transcript.history.messages, *project_input(prompt.input or NO_INPUT_MESSAGE),
                    *transcript.messages]
        if inp.context_max_messages or inp.context_max_tokens:
            limit = ContextLimit(max_messages=inp.context_max_messages, max_tokens=inp.context_max_tokens)
            messages = trim_messages(messages, limit)
        # Built without validation: every part already is the model it must be (the messages come from the
        # projection, most of them from the transcript cache), and validating them again is measurable at
        # turn 500 of a conversation (2,000 messages).
        request = ModelRequest.model_construct(
            instructions=instructions, messages=messages, round=inp.round, prompt_id=prompt.id,
            settings=self.runtime.settings_for(prompt), cache_key=prompt.conversation_id or prompt.id,
            tools=[ToolSpec(id=t.id, description=t.description, parameters=t.parameters_schema())
                   for t, _ in prepared.tools.values()],
        )
        return await self._before_model(request)

    async def _answer(self, inp: RoundInput, prompt: Prompt, request: ModelRequest, live: LiveDetails,
                      logger: Any) -> tuple[ModelResponse, ModelProvider, int]:
        """The model's answer (streamed or not, priced, after plugins' `after_model`), from the chain's model at
        the round's fallback position; a failure retries, falls back to the next model, or ends the prompt."""
        chain = self.runtime.chain_for(prompt.model)
        position = min(inp.fallback, len(chain) - 1)
        provider = chain[position]
        fallback = chain[position + 1] if position + 1 < len(chain) else None
        budget_spent = activity.info().attempt > self.runtime.fallback_after_attempts
        if fallback is not None and budget_spent:  # e.g. earlier attempts timed out: no error reached us
            raise _fall_back(position + 1, fallback, f"{_spec(provider)} did not answer within "
                                                     f"{self.runtime.fallback_after_attempts} attempts")
        logger = logger.bind(model=_spec(provider), fallback=position)
        try:
            with telemetry.model_call(provider, request, record_content=self.runtime.trace_content,
                                      conversation_id=prompt.conversation_id) as call:
                if self.runtime.streams_text(provider):
                    response = await self._stream_model(provider, request, live)
                else:
                    response = await provider.complete(request)
                response = self._priced(await self._after_model(request, response), provider)
                call.responded(response)
        except RetryableModelError as exc:
            if fallback is not None and activity.info().attempt >= self.runtime.fallback_after_attempts:
                logger.warning("model call failed, falling back", error=str(exc), status=exc.status,
                               next_model=_spec(fallback))
                raise _fall_back(position + 1, fallback, str(exc)) from exc
            logger.warning("model call failed, will retry", error=str(exc), status=exc.status)
            delay = timedelta(seconds=exc.retry_after) if exc.retry_after else None
            raise ApplicationError(str(exc), type=names.RETRYABLE_MODEL_ERROR, next_retry_delay=delay) from exc
        except FatalModelError as exc:
            if fallback is not None:
                logger.warning("model call failed, falling back", error=str(exc), status=exc.status,
                               next_model=_spec(fallback))
                raise _fall_back(position + 1, fallback, str(exc)) from exc
            logger.error("model call failed", error=str(exc), status=exc.status)
            raise ApplicationError(str(exc), type=names.FATAL_MODEL_ERROR, non_retryable=True) from exc
        logger.debug("model responded", tool_calls=len(response.tool_calls), model=response.model)
        return response, provider, position

    def _plan(self, response: ModelResponse, provider: ModelProvider, position: int, request: ModelRequest,
              prepared: PreparedRound, schema: OutputSchema | None) -> RoundResult:
        """What the workflow does next: the tool calls planned, or the final answer checked against the schema."""
        calls = [plan_call(call, prepared.tools, self.runtime.decision_key, self.runtime.fast_tools.runs_local,
                           four_eyes=self.runtime.four_eyes, notify=self.runtime.notify)
                 for call in response.tool_calls]
        next_step: NextStep = RunTools(calls=calls) if calls else FinalAnswer()
        if schema is not None and not calls:
            data, output_error = schema.check(response.text)
            next_step = RetryForSchema(reason=output_error) if output_error is not None else FinalAnswer(data=data)
        return RoundResult(
            reasoning=response.reasoning, text=response.text, next=next_step, usage=response.usage,
            plugin_state=prepared.plugin_state,
            model=response.model or provider.name, event_hooks=self.runtime.handles_events,
            spec=_spec(provider), fallback=position,
            settings=request.settings if request.settings != ModelSettings() else None,
        )

    def _priced(self, response: ModelResponse, provider: ModelProvider) -> ModelResponse:
        """The response with its cost from the price table when the provider reported none."""
        if response.usage.cost is not None:
            return response
        usage = self.runtime.prices.with_cost(response.model or provider.name, response.usage)
        return response.model_copy(update={"usage": usage})

    async def _stream_model(self, provider: ModelProvider, request: ModelRequest,
                            live: LiveDetails) -> ModelResponse:
        """Call the model streaming; the text (and reasoning summary) so far goes to the heartbeat details,
        where watchers read it: nothing is written to the prompt's history."""
        attempt = activity.info().attempt
        text = _StreamedText(request.round, attempt, "text")
        reasoning = _StreamedText(request.round, attempt, "reasoning")
        last = 0.0
        loop = asyncio.get_running_loop()

        def publish() -> None:
            live.set(StreamingText(text=text.delta(), reasoning=reasoning.delta()))

        def adding_to(streamed: _StreamedText) -> Callable[[str], Awaitable[None]]:
            async def add(chunk: str) -> None:
                nonlocal last
                streamed.add(chunk)
                if loop.time() - last >= LIVE_TEXT_EVERY_SECONDS:
                    last = loop.time()
                    publish()
            return add

        response = await provider.stream(request, adding_to(text), adding_to(reasoning))  # type: ignore[attr-defined]
        publish()
        return response  # type: ignore[no-any-return]

    async def _before_model(self, request: ModelRequest) -> ModelRequest:
        for plugin in self.runtime.plugins:
            request = await plugin.before_model(request) or request
        return request

    async def _after_model(self, request: ModelRequest, response: ModelResponse) -> ModelResponse:
        for plugin in self.runtime.plugins:
            response = await plugin.after_model(request, response) or response
        return response


class _StreamedText:
    """Text as it streams, keeping only its tail (what a watcher joining late is shown)."""

    def __init__(self, round_number: int, attempt: int, kind: Literal["text", "reasoning"]) -> None:
        self.round, self.attempt, self.kind = round_number, attempt, kind
        self.chunks: list[str] = []
        self.length = 0

    def add(self, chunk: str) -> None:
        self.chunks.append(chunk)
        self.length += len(chunk)

    def delta(self) -> TextDelta | None:
        if not self.length:
            return None
        tail = "".join(self.chunks)[-LIVE_TEXT_TAIL_CHARS:]
        self.chunks = [tail]
        return TextDelta(round=self.round, attempt=self.attempt, offset=self.length - len(tail), text=tail,
                         kind=self.kind)


def _spec(provider: ModelProvider) -> str:
    """`provider:model`, as configured (the record's name for who answered)."""
    return f"{provider.name}:{getattr(provider, 'model', '')}".rstrip(":")


def _fall_back(position: int, provider: ModelProvider, reason: str) -> ApplicationError:
    """Ends this model's attempts; the workflow calls the round again with the chain's next model."""
    return ApplicationError(f"{reason}; falling back to {_spec(provider)}", position, _spec(provider),
                            type=names.MODEL_FALLBACK_ERROR, non_retryable=True)


def _output_schema(inp: RoundInput) -> OutputSchema | None:
    if inp.output_schema is None:
        return None
    try:
        return OutputSchema.resolve(inp.output_schema)
    except Exception as exc:
        raise ApplicationError(f"invalid output schema: {exc}", type=names.INVALID_OUTPUT_SCHEMA_ERROR,
                               non_retryable=True) from exc
