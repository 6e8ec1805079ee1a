"""Sub-agents of a prompt: the child prompt a sub-agent call starts, the approvals it reports to its parent,
and decisions the parent forwards to it (its calls are addressed `<sub-agent call id>/<its call id>`).

The same object reports this prompt's own waiting calls to its parent, when it is a sub-agent's prompt.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from temporalio.exceptions import ChildWorkflowError, WorkflowAlreadyStartedError

from durable_agent.agent.events import EventKind
from durable_agent.agent.models import (
    DataOutput,
    Decision,
    TextOutput,
    ToolError,
    ToolOutput,
    ToolSuccess,
)
from durable_agent.workflows import names
from durable_agent.workflows.details import prompt_summary
from durable_agent.workflows.failures import failure_reason, is_cancellation
from durable_agent.workflows.prompt.context import PromptContext, Room
from durable_agent.workflows.prompt.refusals import Refusal
from durable_agent.workflows.protocol import (
    ApproveRequest,
    ChildApprovals,
    ParentLink,
    PendingApproval,
    PlannedCall,
    PromptRequest,
    RejectRequest,
    StreamEvent,
    ToolInvocationResult,
)
from durable_agent.workflows.versioning import versions

CHILD_VERDICT_TIMEOUT = timedelta(seconds=60)  # how long a forwarded decision's update waits for the sub-agent


@dataclass
class Child:
    """A sub-agent this prompt started: only its reports are taken."""

    workflow_id: str
    nonce: str
    run_id: str | None = None


class Listing(Protocol):
    """What this prompt lists as waiting (the approvals desk, approvals.py)."""

    def listed(self) -> list[PendingApproval]: ...
    def publish_pending(self) -> None: ...


class SubAgents(Room):
    """Reports are taken only from the child this prompt started; forwarded decisions stay listed until the
    sub-agent reports them taken."""

    def __init__(self, context: PromptContext, listing: Listing) -> None:
        super().__init__(context)
        self._listing = listing
        self.reports: dict[str, ChildApprovals] = {}  # by sub-agent call id: what its prompt waits for
        self._announced: set[str] = set()  # sub-agents' calls (`<call>/<its call>`) published as approval_requested
        self._children: dict[str, Child] = {}  # by sub-agent call id
        self._refusals: dict[str, str] = {}  # `<call>/<its call>` -> why its sub-agent refused a decision

    # --- running a sub-agent ---------------------------------------------------------------------------

    def child_request(self, entry: ToolOutput, call: PlannedCall, arguments: object,
                      nonce: str, child_id: str | None = None) -> PromptRequest:
        """The child prompt's input (raises ValueError when the call's arguments cannot make one)."""
        agent = call.agent
        assert agent is not None
        host, own = self._host, self._request
        parent_path = [*own.parent.path, own.parent.prompt_id] if own.parent else []
        return PromptRequest(
            prompt_id=child_id or f"{host.workflow_id}.{entry.id}", user_id=self._record.prompt.user_id,
            model=agent.model,
            input=arguments.get("task") if isinstance(arguments, dict) else None,  # type: ignore[arg-type]
            instructions=agent.instructions, max_rounds=agent.max_rounds, output_schema=agent.output_schema,
            plugins=agent.plugins, fail_workflow_on_error=False,
            max_parallel_tools=own.max_parallel_tools, workflow_version=versions.CURRENT_VERSION,
            budgets=list(own.budgets), **self._model_calls_for(agent.model),  # the same period budgets
            parent=ParentLink(workflow_id=host.workflow_id, prompt_id=self._record.prompt.id, tool_call_id=entry.id,
                              path=parent_path, report_nonce=nonce))

    async def run(self, entry: ToolOutput, call: PlannedCall, arguments: object) -> ToolInvocationResult:
        """A sub-agent call: a child PromptWorkflow whose final answer (data, or else text) is the result."""
        # `<prompt>.<call>.<random>`: a call id can be predictable, so nobody can start this id first (agent/ids.py)
        child_id = f"{self._host.workflow_id}.{entry.id}.{self._host.random_id()[:8]}"
        nonce = self._host.random_id()  # its reports must carry it
        try:
            request = self.child_request(entry, call, arguments, nonce, child_id)
        except ValueError as exc:
            return ToolInvocationResult(result=ToolError(error=f"Sub-agent '{call.tool}' cannot start: {exc}"))
        entry.child_prompt_id = child_id
        self._record.touch(entry)
        self._children[entry.id] = Child(workflow_id=child_id, nonce=nonce)
        failed: str | None = None
        try:
            # start + await: the same commands as execute_child_workflow, and the child's run id in between
            handle = await self._host.start_child(
                request, id=child_id, summary=f"sub-agent {call.tool}",
                memo={"summary": f"sub-agent {call.tool}: {prompt_summary(request.user_id, request.input)}"})
            self._children[entry.id].run_id = handle.first_execution_run_id
            child = await handle
        except ChildWorkflowError as exc:
            if is_cancellation(exc):
                raise
            failed = f"Sub-agent '{call.tool}' failed: {failure_reason(exc)}"
        except WorkflowAlreadyStartedError:  # the call's error, never the prompt's failure
            failed = f"Sub-agent '{call.tool}' cannot start: id-taken: another workflow holds {child_id!r}"
        finally:
            reported = self.reports.pop(entry.id, None)
        if reported is not None:  # not in `finally`: an evicted workflow's coroutine is closed outside its loop
            self._listing.publish_pending()
        if failed is not None:
            return ToolInvocationResult(result=ToolError(error=failed))
        self._record.prompt.usage = self._record.prompt.usage + child.usage
        if child.state != "completed":
            why = child.error or (child.stop.words() if child.stop else "no answer")
            return ToolInvocationResult(result=ToolError(error=f"Sub-agent '{call.tool}' ended {child.state}: {why}"))
        answer = next((o.data for o in reversed(child.output) if isinstance(o, DataOutput)), None)
        if answer is None:
            answer = next((o.text for o in reversed(child.output) if isinstance(o, TextOutput)), "")
        return ToolInvocationResult(result=ToolSuccess(output=answer))

    def _model_calls_for(self, tier: str) -> dict[str, object]:
        """How a sub-agent's model calls run: local when this prompt's are; on this prompt's model queues when it
        uses the same tier (its input records them); another tier's queues as its worker says (workers/routing.py)."""
        request = self._request
        queues = {"model_task_queue": request.model_task_queue, "model_routing": request.model_routing}
        return {"model_local": request.model_local, **(queues if tier == request.model else {})}

    # --- reports from sub-agents -------------------------------------------------------------------------

    def accept_report(self, report: ChildApprovals) -> str | None:
        """A sub-agent's prompt reports the approvals it waits for; they are listed (and decided) here too."""
        entry = self._record.tool_call(report.tool_call_id)
        if entry is None or entry.child_prompt_id != report.child_workflow_id or entry.finished_at is not None:
            return f"no running sub-agent call {report.tool_call_id!r}"
        if not self._from_own_child(report):
            return (f"report for sub-agent call {report.tool_call_id!r} refused: it does not come from the "
                    "sub-agent this prompt started (workflow id, run id or nonce differ)")
        for child_call, reason in report.refused.items():
            self._refusals[f"{report.tool_call_id}/{child_call}"] = reason
        self.reports[report.tool_call_id] = report
        self._listing.publish_pending()
        for pending in report.pending:  # watchers of this prompt see the sub-agent's requests, once each
            call_id = f"{report.tool_call_id}/{pending.tool_call_id}"
            if call_id not in self._announced:
                self._announced.add(call_id)
                self._host.publish(StreamEvent(kind=EventKind.APPROVAL_REQUESTED,
                                                      index=self._record.index(entry),
                                                      output=child_entry(call_id, pending)))
        self._host.spawn(self.report_to_parent())
        return None

    def _from_own_child(self, report: ChildApprovals) -> bool:
        """Whether a report names the child this prompt started for the call: its workflow id, the nonce this
        prompt gave it and (once its start is known) its run id."""
        child = self._children.get(report.tool_call_id)
        if child is None or report.child_workflow_id != child.workflow_id or report.nonce != child.nonce:
            return False
        return child.run_id is None or report.child_run_id == child.run_id

    def call(self, tool_call_id: str) -> tuple[ChildApprovals, PendingApproval] | None:
        """A pending call of a sub-agent, addressed as `<sub-agent call id>/<its call id>`."""
        parent_call, sep, child_call = tool_call_id.partition("/")
        report = self.reports.get(parent_call) if sep else None
        if report is None:
            return None
        found = next((p for p in report.pending if p.tool_call_id == child_call), None)
        return (report, found) if found is not None else None

    def waiting(self) -> bool:
        return any(report.pending for report in self.reports.values())

    def pending_rows(self) -> list[PendingApproval]:
        """The sub-agents' waiting calls as this prompt lists them, in the order of their calls in the record."""
        prompt, host = self._record.prompt, self._record.host
        return [pending.model_copy(update={"tool_call_id": f"{call_id}/{pending.tool_call_id}",
                                           "path": [report.child_workflow_id, *pending.path],
                                           "prompt_id": host.workflow_id, "user_id": prompt.user_id,
                                           "conversation_id": prompt.conversation_id})
                for call_id, report in sorted(self.reports.items(), key=lambda item: self._record.position(item[0]))
                for pending in report.pending]

    # --- decisions forwarded to a sub-agent --------------------------------------------------------------

    async def forwarded(self, kind: str, request: ApproveRequest | RejectRequest) -> ToolOutput:
        """An update's decision on a sub-agent's call: forwarded, then the sub-agent's verdict awaited, so a
        refusal there fails this update too."""
        self._refusals.pop(request.tool_call_id, None)
        forwarded = self.forward(kind, request)
        await self._verdict(request.tool_call_id)
        return forwarded

    def forward(self, kind: str, request: ApproveRequest | RejectRequest) -> ToolOutput:
        found = self.call(request.tool_call_id)
        assert found is not None
        report, pending = found
        child_request = request.model_copy(update={"tool_call_id": pending.tool_call_id})
        signal = names.APPROVE_SIGNAL if kind == "approve" else names.REJECT_SIGNAL
        self._host.spawn(self._host.signal(report.child_workflow_id, signal, child_request))
        # The call stays listed until the sub-agent, which verifies the decision, reports it decided.
        decision = Decision(decision="approved" if kind == "approve" else "rejected", by=request.by,
                            at=self._host.now(), reason=getattr(request, "reason", None))
        return child_entry(request.tool_call_id, pending, decision)

    async def _verdict(self, tool_call_id: str) -> None:
        """Wait until the sub-agent took the forwarded decision (it no longer lists the call) or refused it
        (raised here, with its reason); after CHILD_VERDICT_TIMEOUT, the call is returned as forwarded."""
        def settled() -> bool:
            return tool_call_id in self._refusals or self.call(tool_call_id) is None

        if not await self._host.wait(settled, CHILD_VERDICT_TIMEOUT, "sub-agent decision verdict"):
            return
        reason = self._refusals.pop(tool_call_id, None)
        if reason is not None:
            raise Refusal("not-allowed", reason).error()

    # --- this prompt as a sub-agent ------------------------------------------------------------------------

    def report_refusal(self, tool_call_id: str, problem: str) -> None:
        """A decision the parent forwarded was refused here: tell the parent, whose update waits for it."""
        link = self._request.parent
        own_call = self._record.tool_call(tool_call_id) is not None  # junk ids are only audited here
        if own_call and link is not None and link.report_nonce is not None:
            self._host.spawn(self.report_to_parent({tool_call_id: problem}))

    async def report_to_parent(self, refused: dict[str, str] | None = None) -> None:
        link = self._request.parent
        if link is None:
            return
        host = self._host
        report = ChildApprovals(tool_call_id=link.tool_call_id, child_workflow_id=host.workflow_id,
                                pending=self._listing.listed())
        if link.report_nonce is not None:  # a parent that checks where reports come from
            report = report.model_copy(update={"child_run_id": host.run_id, "nonce": link.report_nonce,
                                               "refused": refused or {}})
        try:
            await host.signal(link.workflow_id, names.CHILD_APPROVALS_SIGNAL, report)
        except Exception as exc:  # the parent is gone: our own pending calls still work
            host.logger.warning("could not report approvals to the parent prompt: %s", exc)


def child_entry(call_id: str, pending: PendingApproval, decision: Decision | None = None) -> ToolOutput:
    """A sub-agent's pending call as this prompt shows it: addressed `<call>/<its call>`."""
    assert pending.requested_at is not None  # a waiting call's view is stamped
    return ToolOutput(id=call_id, tool=pending.tool, input=pending.input, started_at=pending.requested_at,
                      result=pending.request(), decision=decision)
