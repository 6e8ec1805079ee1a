"""SubAgents (workflows/prompt/sub_agents.py): a sub-agent's prompt input, its reports, and forwarded decisions."""

from __future__ import annotations

from durable_agent.agent.events import EventKind
from durable_agent.agent.models import ToolOutput
from durable_agent.workflows.prompt.sub_agents import Child, SubAgents
from durable_agent.workflows.protocol import (
    ApproveRequest,
    ChildApprovals,
    ParentLink,
    PendingApproval,
    PromptRequest,
    ReadyCall,
    SubAgentCall,
)
from tests.unit.conftest import PlainHost, context_of


class Harness:
    """A prompt's sub-agents; the desk they list through counts its memo writes and lists nothing."""

    def __init__(self, host: PlainHost, request: PromptRequest | None = None) -> None:
        self.host = host
        self.memo_writes = 0
        self.children = SubAgents(context_of(host, request, user_id="u"), self)
        self.record = self.children._record

    @property
    def spawned(self) -> int:
        return self.host.spawned

    def listed(self) -> list[PendingApproval]:
        return []

    def publish_pending(self) -> None:
        self.memo_writes += 1

    def sub_agent_call(self, call_id: str) -> ToolOutput:
        """A running sub-agent call, with the child this prompt started for it (as `SubAgents.run` notes it)."""
        entry = self.record.open_call(ReadyCall(id=call_id, tool="helper", agent=SubAgentCall(instructions="x")))
        entry.child_prompt_id = f"wf-1.{call_id}"
        self.children._children[call_id] = Child(workflow_id=entry.child_prompt_id, nonce=f"nonce-{call_id}",
                                                 run_id=f"run-{call_id}")
        return entry

    @staticmethod
    def report(call_id: str, pending: list[PendingApproval]) -> ChildApprovals:
        """What the child started for `call_id` reports."""
        return ChildApprovals(tool_call_id=call_id, child_workflow_id=f"wf-1.{call_id}", pending=pending,
                              child_run_id=f"run-{call_id}", nonce=f"nonce-{call_id}")


def _waiting(host: PlainHost, call_id: str) -> PendingApproval:
    return PendingApproval(prompt_id="wf-1.a", user_id="owner", tool_call_id=call_id, tool="pay",
                           input={"amount": 1}, reason="money", requested_at=host.clock)


def test_a_sub_agents_waiting_calls_are_listed_here_under_its_call(host: PlainHost) -> None:
    harness = Harness(host)
    harness.sub_agent_call("a")
    report = harness.report("a", [_waiting(host, "x"), _waiting(host, "y")])
    assert harness.children.accept_report(report) is None
    rows = harness.children.pending_rows()
    assert [(r.tool_call_id, r.path) for r in rows] == [("a/x", ["wf-1.a"]), ("a/y", ["wf-1.a"])]
    assert harness.children.waiting() and harness.children.call("a/y") is not None
    assert harness.children.call("a/z") is None and harness.children.call("a") is None
    announced = [e.output.id for e in host.events if e.kind == EventKind.APPROVAL_REQUESTED and e.output]
    assert announced == ["a/x", "a/y"]
    harness.children.accept_report(report)
    assert len([e for e in host.events if e.kind == EventKind.APPROVAL_REQUESTED]) == 2  # once each
    assert harness.spawned == 2  # each report goes on up to this prompt's parent


def test_reports_for_calls_that_are_no_sub_agents_or_from_strangers_are_refused(host: PlainHost) -> None:
    harness = Harness(host)
    harness.sub_agent_call("a")
    wrong = ChildApprovals(tool_call_id="a", child_workflow_id="elsewhere", pending=[_waiting(host, "x")])
    assert harness.children.accept_report(wrong) == "no running sub-agent call 'a'"
    forged = ChildApprovals(tool_call_id="a", child_workflow_id="wf-1.a", pending=[_waiting(host, "x")])
    problem = harness.children.accept_report(forged)
    assert problem is not None and "does not come from the sub-agent this prompt started" in problem
    assert harness.children.pending_rows() == []


def test_a_forwarded_decision_stays_listed_until_the_sub_agent_reports_it_taken(host: PlainHost) -> None:
    harness = Harness(host)
    harness.sub_agent_call("a")
    harness.children.accept_report(harness.report("a", [_waiting(host, "x")]))
    shown = harness.children.forward("approve", ApproveRequest(tool_call_id="a/x", by="bob"))
    assert shown.id == "a/x" and shown.decision is not None and shown.decision.by == "bob"
    assert [row.tool_call_id for row in harness.children.pending_rows()] == ["a/x"]  # the sub-agent checks it
    assert harness.spawned == 2  # the report up, the signal down
    harness.children.accept_report(harness.report("a", []))
    assert harness.children.pending_rows() == []


def test_a_sub_agents_prompt_names_its_parent_and_uses_the_same_model_queues(host: PlainHost) -> None:
    parent = ParentLink(workflow_id="root", prompt_id="root-prompt", tool_call_id="t0")
    own = PromptRequest(model_task_queue="models", max_parallel_tools=2, parent=parent)
    harness = Harness(host, own)
    entry = harness.sub_agent_call("a")
    call = ReadyCall(id="a", tool="helper", agent=SubAgentCall(instructions="help", max_rounds=3))
    request = harness.children.child_request(entry, call, {"task": "do it"}, "nonce-1")
    assert (request.prompt_id, request.input, request.max_rounds) == ("wf-1.a", "do it", 3)
    assert request.parent is not None and request.parent.path == ["root-prompt"]
    assert (request.parent.report_nonce, request.model_task_queue, request.max_parallel_tools) == ("nonce-1",
                                                                                                   "models", 2)
    other_tier = ReadyCall(id="a", tool="helper", agent=SubAgentCall(instructions="help", model="high"))
    assert harness.children.child_request(entry, other_tier, {}, None).model_task_queue is None


def test_a_sub_agent_of_a_prompt_with_local_model_calls_has_them_too(host: PlainHost) -> None:
    harness = Harness(host, PromptRequest(model_local=True))
    entry = harness.sub_agent_call("a")
    for tier in ("normal", "high"):
        call = ReadyCall(id="a", tool="helper", agent=SubAgentCall(instructions="help", model=tier))  # type: ignore[arg-type]
        assert harness.children.child_request(entry, call, {}, None).model_local is True
    plain = Harness(host)
    assert plain.children.child_request(plain.sub_agent_call("b"), ReadyCall(
        id="b", tool="helper", agent=SubAgentCall(instructions="help")), {}, None).model_local is False
