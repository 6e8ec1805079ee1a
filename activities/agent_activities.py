"""The activities of a prompt: one model round, one tool call, one event delivery. All I/O lives here."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any, Literal

import pydantic_core
from pydantic import BaseModel, JsonValue
from temporalio import activity
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from durable_agent.activities import telemetry
from durable_agent.activities.budget_activities import BudgetActivities
from durable_agent.activities.mcp_tools import MCPUnavailable
from durable_agent.activities.runtime import AgentRuntime
from durable_agent.activities.transcripts import HistoryBroken, Transcript, TranscriptMissing
from durable_agent.agent.context import FileStore, ToolContext, copy_state
from durable_agent.agent.context_window import ContextLimit, trim_messages
from durable_agent.agent.errors import PluginPrepareError, ToolInputError
from durable_agent.agent.logging import get_logger
from durable_agent.agent.messages import ModelRequest, ModelResponse, ModelToolCall, ToolSpec
from durable_agent.agent.model_settings import ModelSettings
from durable_agent.agent.models import ToolError, ToolSuccess
from durable_agent.agent.output_schema import OutputSchema
from durable_agent.agent.plugins import ToolCallInfo
from durable_agent.agent.projection import project_prompt
from durable_agent.agent.providers.base import FatalModelError, ModelProvider, RetryableModelError
from durable_agent.agent.subagents import sub_agent_of
from durable_agent.agent.tools import Approval, Tool, ToolFailed
from durable_agent.workflows import names
from durable_agent.workflows.names import (
    CHECK_CORRECTION_ACTIVITY,
    EMIT_EVENT_ACTIVITY,
    INVOKE_TOOL_ACTIVITY,
    MODEL_ROUND_ACTIVITY,
    STORE_HISTORY_ACTIVITY,
)
from durable_agent.workflows.protocol import (
    ApprovalRequirement,
    CallNeedingApproval,
    CorrectionCheck,
    CorrectionVerdict,
    EventDelivery,
    HistoryLink,
    HistoryRef,
    InvalidCall,
    PlannedCall,
    ReadyCall,
    RoundInput,
    RoundResult,
    StoreHistoryRequest,
    StreamingText,
    SubAgentCall,
    TextDelta,
    ToolInvocation,
    ToolInvocationResult,
    ToolProgress,
)

log = get_logger("dagent.activities")

HEARTBEAT_INTERVAL_SECONDS = 0.5  # the worker forwards them at most every 0.5 s (workers.plugin.HEARTBEAT_THROTTLE)
LIVE_TEXT_TAIL_CHARS = 16_000  # streamed text kept in heartbeat details (watchers joining late see this much)
LIVE_TEXT_EVERY_SECONDS = 0.2  # how often the streamed text so far is handed to the heartbeat
NO_INPUT_MESSAGE = "(This prompt was started by the system; there is no user message.)"


def _bound_log(**extra: Any) -> Any:
    info = activity.info()
    return log.bind(workflow_id=info.workflow_id, activity_id=info.activity_id,
                    activity=info.activity_type, attempt=info.attempt, **extra)


class AgentActivities:
    """Register with `Worker(activities=AgentActivities(runtime).all())`."""

    def __init__(self, runtime: AgentRuntime) -> None:
        self.runtime = runtime
        self.transcripts = runtime.transcripts  # shared by every worker of this process (workflow and model queues)

    def all(self) -> list[Any]:
        return [self.model_round, self.invoke_tool, self.emit_event, self.store_history, self.check_correction,
                *BudgetActivities(self.runtime.decision_key).all()]

    async def _load_link(self, ref: str) -> HistoryLink:
        return await read_history_link(self.runtime.file_store, ref, _payload_codec())

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

    @activity.defn(name=STORE_HISTORY_ACTIVITY)
    async def store_history(self, request: StoreHistoryRequest) -> HistoryRef:
        """Append prompt records to a conversation's history chain in the store (content-addressed: a retry
        writes the same object, or with payload encryption on a second one whose random nonce differs, which
        nothing references); the link stays cached on this worker."""
        info = activity.info()
        link = HistoryLink(parent=request.parent, records=request.records)
        payload = Payload(metadata={"encoding": b"json/plain"}, data=link.model_dump_json().encode())
        if (codec := _payload_codec()) is not None:  # encrypted like every payload: the store holds no plaintext
            payload = (await codec.encode([payload]))[0]
        store = self.runtime.file_store.scoped(info.workflow_namespace, info.workflow_id or "unscoped")
        ref = await asyncio.to_thread(store.put, "history-link.pb", payload.SerializeToString(),
                                      "application/x-protobuf")
        self.transcripts.history.add(ref, link)
        return HistoryRef(ref=ref, count=(request.parent.count if request.parent else 0) + len(request.records))

    @activity.defn(name=MODEL_ROUND_ACTIVITY)
    async def model_round(self, inp: RoundInput) -> RoundResult:
        """One round's model call. It heartbeats from its first moment to its last (history loading, plugins'
        `prepare`, the provider call), so a worker that dies anywhere in it is noticed within the model
        activity's heartbeat timeout (seconds) and another worker retries the call, not after 5 minutes."""
        live = _LiveDetails()
        async with _heartbeating(live):
            return await self._model_round(inp, live)

    async def _model_round(self, inp: RoundInput, live: _LiveDetails) -> RoundResult:
        logger = _bound_log(prompt_id=inp.prompt.id, round=inp.round, tier=inp.prompt.model)
        transcript = await self._transcript(inp, logger)
        prompt = inp.prompt.model_copy(update={"output": transcript.outputs})
        try:
            prepared = await self.runtime.prepare(prompt, inp.round, only=inp.plugins)
        except PluginPrepareError as exc:
            logger.error("plugin prepare failed", error=str(exc))
            raise ApplicationError(str(exc), type=names.PLUGIN_PREPARE_ERROR, non_retryable=True) from exc
        schema = _output_schema(inp)
        instructions = "\n\n".join(part for part in [inp.instructions or "", *prepared.context,
                                                       schema.instruction() if schema else ""] if part)
        # A system-initiated prompt has no user message; a neutral one keeps every provider's turn order valid.
        current = prompt.model_copy(update={"plugin_state": {}, "input": prompt.input or NO_INPUT_MESSAGE})
        messages = [*transcript.history.messages, *project_prompt(current)]  # = project_prompts(history, current)
        if inp.context_max_messages or inp.context_max_tokens:
            limit = ContextLimit(max_messages=inp.context_max_messages, max_tokens=inp.context_max_tokens)
            messages = trim_messages(messages, limit)
        settings = self.runtime.settings_for(prompt)
        # Built without validation: every part already is the model it must be (the messages come from the
        # projection, most of them from the transcript cache), and validating them again cost ~1 ms per round
        # at turn 500 of a conversation (2,000 messages).
        request = ModelRequest.model_construct(
            instructions=instructions, messages=messages, round=inp.round, prompt_id=prompt.id,
            settings=settings, cache_key=prompt.conversation_id or prompt.id,
            tools=[ToolSpec(id=t.id, description=t.description, parameters=t.parameters_schema())
                   for t, _ in prepared.tools.values()],
        )
        request = await self._before_model(request)
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
            with telemetry.model_call(provider, request, record_content=self.runtime.trace_content) as call:
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
        calls = [_plan_call(call, prepared.tools, self.runtime.decision_key, self.runtime.fast_tools.runs_local,
                            four_eyes=self.runtime.four_eyes)
                 for call in response.tool_calls]
        data, output_error = (schema.check(response.text) if schema and not calls else (None, None))
        model_name = response.model or provider.name
        return RoundResult(
            reasoning=response.reasoning, text=response.text, calls=calls, usage=response.usage,
            plugin_state=prepared.plugin_state,
            model=model_name, event_hooks=self.runtime.handles_events, data=data, output_error=output_error,
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
                            live: _LiveDetails) -> ModelResponse:
        """Call the model streaming; the text (and reasoning summary) so far goes to the heartbeat details,
        where watchers read it: nothing is written to the prompt's history."""
        attempt = activity.info().attempt
        text = _StreamedText(request.round, attempt, "text")
        reasoning = _StreamedText(request.round, attempt, "reasoning")
        last = 0.0
        loop = asyncio.get_running_loop()

        def publish() -> None:
            live.set(StreamingText(text=text.delta(), reasoning=reasoning.delta()))

        def maybe_publish() -> None:
            nonlocal last
            if loop.time() - last >= LIVE_TEXT_EVERY_SECONDS:
                last = loop.time()
                publish()

        async def on_text(chunk: str) -> None:
            text.add(chunk)
            maybe_publish()

        async def on_reasoning(chunk: str) -> None:
            reasoning.add(chunk)
            maybe_publish()

        response = await provider.stream(request, on_text, on_reasoning)  # type: ignore[attr-defined]
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

    @activity.defn(name=INVOKE_TOOL_ACTIVITY)
    async def invoke_tool(self, call: ToolInvocation) -> ToolInvocationResult:
        prompt_id = call.prompt_id or activity.info().workflow_id or ""
        logger = _bound_log(prompt_id=prompt_id, tool=call.tool, tool_call_id=call.id)
        tool = self.runtime.tools.find(call.plugin, call.tool)
        if tool is None:
            try:
                tool = await self.runtime.find_mcp_tool(call.plugin, call.tool)
            except MCPUnavailable as exc:
                if activity.info().attempt < call.max_attempts:
                    raise ApplicationError(str(exc), type=names.MCP_UNAVAILABLE_ERROR) from exc
                logger.warning("mcp server unavailable", error=str(exc))
                return _error(str(exc))
        if tool is None:
            logger.warning("tool not in this worker's registry")
            return _error(f"Tool '{call.tool}' is not available on this worker: its plugin "
                          f"{call.plugin or '(none)'} does not list it in Plugin.tools, and this worker has not "
                          "seen it offered by the plugin's prepare.")
        info_for_hooks = ToolCallInfo(prompt_id=prompt_id, user_id=call.user_id,
                                      conversation_id=call.conversation_id, tool_call_id=call.id, tool=call.tool,
                                      input=call.input)
        for plugin in self.runtime.plugins:
            decided = await plugin.before_tool(info_for_hooks)
            if isinstance(decided, ToolCallInfo):
                info_for_hooks = decided
            elif decided is not None:
                result = await self._after_tool(info_for_hooks, decided)
                self.transcripts.outputs.remember(result)
                return ToolInvocationResult(result=result)
        with telemetry.tool_call(call.tool, call.id, prompt_id) as span:
            live, started = _LiveDetails(), time.monotonic()
            outcome = await self._run_tool(tool, call, prompt_id, info_for_hooks.input, logger, live)
            self.runtime.fast_tools.observe(tool, time.monotonic() - started, reported_progress=live.value is not None)
            outcome.result = await self._after_tool(info_for_hooks, outcome.result)
            if isinstance(outcome.result, ToolError):
                telemetry.tool_outcome(span, "error", outcome.result.error)
            else:
                telemetry.tool_outcome(span, "success")
        self.transcripts.outputs.remember(outcome.result)  # the next model round receives it by reference
        return outcome

    async def _after_tool(self, call: ToolCallInfo, result: ToolSuccess | ToolError) -> ToolSuccess | ToolError:
        for plugin in self.runtime.plugins:
            result = await plugin.after_tool(call, result) or result
        return result

    async def _run_tool(self, tool: Tool[Any], call: ToolInvocation, prompt_id: str, arguments: JsonValue,
                        logger: Any, live: _LiveDetails) -> ToolInvocationResult:
        try:
            args = tool.validate_input(arguments)
        except ToolInputError as exc:
            return _error(str(exc))
        state_before = copy_state(call.plugin_state)
        info = activity.info()
        ctx = ToolContext(
            user_id=call.user_id, prompt_id=prompt_id, conversation_id=call.conversation_id,
            tool_call_id=call.id, idempotency_key=_idempotency_key(call, info),
            state=copy_state(call.plugin_state), services=self.runtime.services,
            file_store=self.runtime.file_store.scoped(info.workflow_namespace, prompt_id), attempt=info.attempt,
            progress=lambda message, fraction: live.set(ToolProgress(
                tool_call_id=call.id, tool=call.tool, message=message, fraction=fraction)),
            is_cancelled=activity.is_cancelled,
        )
        try:
            async with _heartbeating(live, _beat_interval(info.heartbeat_timeout)):
                raw_output = await tool.fn(args, ctx)
        except ToolFailed as exc:
            logger.info("tool reported an error", error=str(exc)[:200])
            return _error(str(exc), side_outputs=ctx)
        except Exception as exc:
            if info.attempt < tool.max_attempts:
                logger.warning("tool raised, will retry", error=f"{type(exc).__name__}: {exc}")
                raise ApplicationError(f"{type(exc).__name__}: {exc}", type=names.TOOL_RAISED_ERROR) from exc
            logger.warning("tool raised", error=f"{type(exc).__name__}: {exc}")
            return _error(f"{type(exc).__name__}: {exc}", side_outputs=ctx)
        try:
            output = _jsonable(raw_output, self.runtime.max_tool_output_bytes)
        except ValueError as exc:
            return _error(str(exc), side_outputs=ctx)
        logger.debug("tool finished")
        changed = ctx.state != state_before
        return ToolInvocationResult(result=ToolSuccess(output=output), side_outputs=list(ctx.side_outputs),
                                    plugin_state=ctx.state if changed else None, state_changed=changed)

    @activity.defn(name=CHECK_CORRECTION_ACTIVITY)
    async def check_correction(self, check: CorrectionCheck) -> CorrectionVerdict:
        """The tool's approval policy run again on arguments an approver corrected: what approval they need.
        The workflow holds no tool code, so it asks here before it takes an approval with a correction."""
        logger = _bound_log(tool=check.tool)
        tool = self.runtime.tools.find(check.plugin, check.tool)
        if tool is None:
            try:
                tool = await self.runtime.find_mcp_tool(check.plugin, check.tool)
            except MCPUnavailable as exc:
                raise ApplicationError(str(exc), type=names.MCP_UNAVAILABLE_ERROR) from exc
        if tool is None:
            return CorrectionVerdict(problem=f"tool '{check.tool}' is not available on this worker, so its "
                                             "approval policy cannot check the correction")
        try:
            args = tool.validate_input(check.input)
        except ToolInputError as exc:
            return CorrectionVerdict(problem=str(exc))
        try:
            approval = tool.approval_for(args)
        except Exception as exc:  # fail closed: a correction the policy cannot judge is not approved
            logger.warning("approval policy raised on a correction", error=f"{type(exc).__name__}: {exc}")
            return CorrectionVerdict(problem=f"the approval policy of '{tool.id}' raised {type(exc).__name__} "
                                             "on the corrected arguments")
        if approval is None:
            return CorrectionVerdict()
        return CorrectionVerdict(requirement=_requirement(tool, approval, self.runtime.decision_key,
                                                          self.runtime.four_eyes))

    @activity.defn(name=EMIT_EVENT_ACTIVITY)
    async def emit_event(self, delivery: EventDelivery) -> None:
        logger = _bound_log(prompt_id=delivery.event.prompt_id, event=delivery.event.kind)
        for plugin in self.runtime.plugins:
            if not plugin.handles_events:
                continue
            try:
                await plugin.on_event(delivery.event)
            except Exception as exc:
                logger.error("plugin event hook failed", plugin=plugin.name, error=f"{type(exc).__name__}: {exc}")


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


class _LiveDetails:
    """The latest heartbeat details of an activity (streamed text, tool progress): every heartbeat carries
    them, so the periodic liveness beat never blanks what watchers and the Temporal UI show."""

    def __init__(self) -> None:
        self.value: BaseModel | None = None

    def set(self, value: BaseModel) -> None:
        self.value = value
        if not activity.info().is_local:
            activity.heartbeat(value.model_dump(mode="json"))

    def beat(self) -> None:
        if self.value is None:
            activity.heartbeat()
        else:
            activity.heartbeat(self.value.model_dump(mode="json"))


@contextlib.asynccontextmanager
async def _heartbeating(live: _LiveDetails, interval: float = HEARTBEAT_INTERVAL_SECONDS) -> AsyncIterator[None]:
    """Heartbeat while a tool or a model call runs: a dead worker is noticed within the heartbeat timeout, and
    a cancelled prompt's cancellation reaches the activity."""

    if activity.info().is_local:  # local activities cannot heartbeat
        yield
        return

    async def beat() -> None:  # the first beat after one interval: a short call sends none (one RPC less)
        while True:
            await asyncio.sleep(interval)
            live.beat()

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()


def _beat_interval(heartbeat_timeout: timedelta | None) -> float:
    """Heartbeat often enough for the call's heartbeat timeout (from the activity's info, not its input)."""
    if not heartbeat_timeout:
        return HEARTBEAT_INTERVAL_SECONDS
    return min(HEARTBEAT_INTERVAL_SECONDS, heartbeat_timeout.total_seconds() / 3)


async def read_history_link(store: FileStore, ref: str, codec: PayloadCodec | None) -> HistoryLink:
    """One link of a conversation's stored history (a Temporal payload, encrypted when the worker has a codec)."""
    payload = Payload.FromString(await asyncio.to_thread(store.get, ref))
    if codec is not None:
        payload = (await codec.decode([payload]))[0]
    return HistoryLink.model_validate_json(payload.data)


def _payload_codec() -> PayloadCodec | None:
    """The worker's payload codec (encryption), if it has one."""
    try:
        return activity.client().data_converter.payload_codec
    except RuntimeError:  # no client: an activity run outside a worker (ActivityEnvironment)
        return None


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


def _error(message: str, side_outputs: ToolContext | None = None) -> ToolInvocationResult:
    extra = list(side_outputs.side_outputs) if side_outputs else []
    return ToolInvocationResult(result=ToolError(error=message), side_outputs=extra)


def _jsonable(value: object, limit: int) -> JsonValue:
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    try:
        plain = pydantic_core.to_jsonable_python(value)
    except pydantic_core.PydanticSerializationError as exc:
        raise ValueError(f"The tool returned a value that is not JSON-serialisable: {exc}") from exc
    encoded = json.dumps(plain, ensure_ascii=False)
    if len(encoded.encode()) <= limit:
        return plain
    kept = encoded.encode()[:limit].decode(errors="ignore")
    return f"{kept}\n[output truncated: {len(encoded.encode())} bytes, limit {limit}]"


def _sub_agent_call(tool: Tool[Any]) -> SubAgentCall | None:
    agent = sub_agent_of(tool)
    if agent is None:
        return None
    return SubAgentCall(instructions=agent.instructions, model=agent.model,
                        plugins=list(agent.plugins) if agent.plugins is not None else None,
                        max_rounds=agent.max_rounds, output_schema=agent.output_schema)


def _idempotency_key(call: ToolInvocation, info: activity.Info) -> str:
    """Stable across retries and worker crashes; scoped by run (for runs that say so): a later prompt that
    reuses the workflow id never gets the key of an earlier run's call."""
    if call.run_scoped:
        return f"{info.workflow_id}/{info.workflow_run_id}/{call.id}"
    return f"{info.workflow_id}/{call.id}"


def _requirement(tool: Tool[Any], approval: Approval, decision_key: str | None,
                 four_eyes: bool) -> ApprovalRequirement:
    expires = approval.expires_after.total_seconds() if approval.expires_after else None
    return ApprovalRequirement(
        reason=approval.reason, approvers=approval.approvers, expires_after_seconds=expires,
        input_schema=tool.parameters_schema(), decision_key=decision_key,
        four_eyes=approval.four_eyes if approval.four_eyes is not None else four_eyes)


def _plan_call(call: ModelToolCall, tools: dict[str, tuple[Tool[Any], str]], decision_key: str | None,
               runs_local: Callable[[Tool[Any]], bool], *, four_eyes: bool = False) -> PlannedCall:
    found = tools.get(call.tool)
    if found is None:
        available = ", ".join(sorted(tools)) or "none"
        return InvalidCall(id=call.id, tool=call.tool, input=call.arguments,
                           error=f"Unknown tool '{call.tool}'. Available tools: {available}.")
    tool, plugin = found
    fields: dict[str, Any] = dict(
        id=call.id, tool=call.tool, input=call.arguments, plugin=plugin,
        timeout_seconds=tool.timeout.total_seconds(), max_attempts=tool.max_attempts,
        failure_mode=tool.failure_mode, local=bool(tool.local),
        heartbeat_timeout_seconds=tool.heartbeat_timeout.total_seconds(),
        sequential=tool.sequential, agent=_sub_agent_call(tool))
    if call.arguments_error:
        return InvalidCall(**fields, error=f"Invalid arguments for tool '{call.tool}': {call.arguments_error}")
    try:
        args = tool.validate_input(call.arguments)
    except ToolInputError as exc:
        return InvalidCall(**fields, error=str(exc))
    try:
        approval = tool.approval_for(args)
    except Exception as exc:
        # Fail closed: a policy that cannot decide leaves the decision to a human.
        return CallNeedingApproval(**fields, approval=ApprovalRequirement(
            reason=f"The approval policy of '{tool.id}' raised {type(exc).__name__}: {exc}; a person must decide.",
            input_schema=tool.parameters_schema(), decision_key=decision_key, four_eyes=four_eyes))
    if approval is None:
        local = runs_local(tool) and fields["agent"] is None
        return ReadyCall(**{**fields, "local": local})
    return CallNeedingApproval(**fields, approval=_requirement(tool, approval, decision_key, four_eyes))
