"""What the next model round is sent, and what the worker already holds.

A round's input carries only the output entries added or changed since the previous round (`changed`), and
earlier prompts by reference once they are in the store; the worker keeps the rest in its cache. A worker that
lacks anything fails the round with `TranscriptMissing`, and `whole()` sends it everything by value.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

from durable_agent.agent.models import Prompt
from durable_agent.workflows import names
from durable_agent.workflows.activity_refs import MODEL_ROUND, STORE_HISTORY
from durable_agent.workflows.failures import fallback_target, transcript_missing
from durable_agent.workflows.history_store import STORE_RETRY, STORE_TIMEOUT
from durable_agent.workflows.prompt.context import PromptContext, Room
from durable_agent.workflows.protocol import HistoryRef, OutputChange, RoundInput, RoundResult, StoreHistoryRequest
from durable_agent.workflows.transcript import change_for

MODEL_TIMEOUT = timedelta(minutes=5)
# A model call on a dead worker is retried after this (the activity heartbeats every 0.5 s from its start; the
# timeout is not part of replay, so changing it needs no patch).
MODEL_HEARTBEAT_TIMEOUT = timedelta(seconds=10)
MODEL_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), backoff_coefficient=2.0, maximum_interval=timedelta(seconds=60),
    maximum_attempts=8, non_retryable_error_types=[
        names.FATAL_MODEL_ERROR, names.PLUGIN_PREPARE_ERROR, names.INVALID_OUTPUT_SCHEMA_ERROR],
)


class RoundInputs(Room):
    """`changed` (the record's): output indices added or changed since the last model round."""

    def __init__(self, context: PromptContext) -> None:
        super().__init__(context)
        self._prompt = context.prompt
        self.changed = context.record.changed
        self._history_sent = False  # the request's by-value history went with a round input of this run
        self._history_stored: HistoryRef | None = None  # the request's history (both parts) in the store

    async def send(self, round_number: int, run_id: str, *, details: str, note: str = "") -> RoundResult:
        """Run the round's activity: first with what changed; again whole when that worker lacked the rest; on
        the next model of the tier's fallback chain (and its provider's queue) when the worker says so. With
        `model_local` and no model queue, as a local activity in the current workflow task."""
        request = self._request
        await self.store_given_history()
        round_input = self.next(round_number, run_id)
        next_model = ""
        queue = request.model_task_queue or None
        self._host.set_details(details)
        while True:
            summary = self.summary(round_number, round_input.fallback, next_model) + note
            try:
                return await self._host.run_activity(
                    MODEL_ROUND, round_input, summary=summary, start_to_close_timeout=MODEL_TIMEOUT,
                    retry_policy=MODEL_RETRY, heartbeat_timeout=MODEL_HEARTBEAT_TIMEOUT, task_queue=queue,
                    local=request.model_local and queue is None)
            except ActivityError as exc:
                if transcript_missing(exc) and round_input.changes is not None:
                    round_input = self.whole(round_input)  # that worker lacked part of it
                    continue
                # Only a worker configured with a fallback chain raises this, so histories without it replay.
                target = fallback_target(exc)
                if target is None or target[0] <= round_input.fallback:
                    raise
                position, next_model = target
                round_input = round_input.model_copy(update={"fallback": position})
                if request.model_routing is not None:  # the next model's provider has its own rate limit
                    queue = request.model_routing.queue_for(next_model)

    def summary(self, round_number: int, fallback: int = 0, model: str = "") -> str:
        """The model activity's summary in the Temporal UI."""
        summary = f"model {self._prompt.model} round {round_number}"
        details = [f"fallback {fallback}: {model}"] if fallback else []
        if self._prompt.model_settings and (settings := self._prompt.model_settings.summary()):
            details.append(settings)
        return f"{summary} ({'; '.join(details)})" if details else summary

    async def store_given_history(self) -> None:
        """Earlier prompts given by value (by a caller, not by a conversation) go to the store before the first
        round, with the `store_history` local activity (its input is not written to history): no round input
        carries them again, and a worker without them loads them from the store."""
        request = self._request
        if self._history_stored is not None or not request.history:
            return
        self._history_stored = await self._host.run_activity(
            STORE_HISTORY, StoreHistoryRequest(parent=request.history_ref, records=request.history), local=True,
            start_to_close_timeout=STORE_TIMEOUT, retry_policy=STORE_RETRY,
            summary=f"store {len(request.history)} earlier prompt record(s)")

    def next(self, round_number: int, run_id: str) -> RoundInput:
        """What changed since the last round; earlier outputs and prompts stay with the worker (its cache) or
        in the store (a conversation's history), referenced, never copied again."""
        round_input = self.ahead(round_number, run_id)
        self.sent(round_input)
        return round_input

    def sent(self, round_input: RoundInput) -> None:
        """A worker has `round_input` (an input built by `ahead`): its changes and history are not sent again."""
        self.changed.difference_update(change.index for change in round_input.changes or [])
        self._history_sent = True

    def ahead(self, round_number: int, run_id: str) -> RoundInput:
        """The next round's input, built now but not yet counted as sent (`sent`): for a model round that a tool
        activity runs after its tool, which may not get to it."""
        request = self._request
        # Tools run on this queue: with model calls on another queue, no tool output is ever cached where they run.
        outputs_by_reference = not request.model_task_queue and not request.model_routing
        output = self._prompt.output
        changes = [change_for(i, output[i]) if outputs_by_reference
                   else OutputChange(index=i, output=output[i]) for i in sorted(self.changed)]
        history = request.history if not self._history_sent and not self._history_stored else []
        history_ref = self._history_stored or request.history_ref
        return RoundInput(
            prompt=self._header(), instructions=request.instructions,
            round=round_number, output_schema=request.output_schema, changes=changes,
            output_count=len(output), history_count=self._history_count(), run_id=run_id,
            context_max_messages=request.context_max_messages, context_max_tokens=request.context_max_tokens,
            plugins=request.plugins, history=history, history_ref=history_ref)

    def whole(self, partial: RoundInput) -> RoundInput:
        """The round's input with every output and earlier prompt by value (only a conversation's stored
        history stays referenced): for a worker that did not have the rest."""
        self._history_sent = True
        whole = self._header().model_copy(update={"output": self._prompt.output})
        return partial.model_copy(update={"prompt": whole.model_copy(deep=True), "changes": None,
                                          "history": [] if self._history_stored else self._request.history,
                                          "history_ref": partial.history_ref})

    def _header(self) -> Prompt:
        """The prompt without its outputs and without the lists that grow every round (model rounds, audit),
        which the worker does not use, so a round's input does not grow with the rounds before it."""
        return self._prompt.model_copy(update={"output": [], "model_rounds": [], "audit": []})

    def _history_count(self) -> int:
        ref = self._request.history_ref
        return len(self._request.history) + (ref.count if ref else 0)
