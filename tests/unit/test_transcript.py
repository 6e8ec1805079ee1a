"""The transcript a model round rebuilds from its input, the worker's cache and the store: never from a query."""

from __future__ import annotations

import asyncio
import inspect
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from durable_agent import activities
from durable_agent.activities.transcripts import (
    HistoryBroken,
    HistoryChain,
    Transcript,
    TranscriptCache,
    TranscriptMissing,
)
from durable_agent.agent.models import (
    ApprovalRequest,
    Prompt,
    PromptOutput,
    TextOutput,
    ToolError,
    ToolOutput,
    ToolSuccess,
)
from durable_agent.agent.projection import project_prompt, project_prompts
from durable_agent.workflows.protocol import HistoryLink, HistoryRef, OutputChange, RoundInput
from durable_agent.workflows.transcript import OUTPUT_REF_MIN_BYTES, apply_changes, build_page, change_for, json_digest

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _tool(i: int, size: int = 100) -> ToolOutput:
    return ToolOutput(id=f"c{i}", tool="t.x", input={}, result=ToolSuccess(output="x" * size), started_at=NOW,
                      finished_at=NOW)


def _history() -> list[Prompt]:
    return [Prompt(id=f"p{n}", user_id="u", input=f"q{n}", output=[TextOutput(text=f"a{n}"), _tool(n)])
            for n in range(3)] + [Prompt(id="empty", user_id="u", input="nothing happened")]


class _Store:
    """An in-memory content-addressed store standing in for the file store (the real one is exercised by
    tests/temporal/test_history_by_reference.py against a real worker)."""

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}
        self.reads = 0

    def put(self, link: HistoryLink) -> HistoryRef:
        data = link.model_dump_json().encode()
        ref = f"sha256:{json_digest(data.decode())}"
        self.blobs[ref] = data
        return HistoryRef(ref=ref, count=(link.parent.count if link.parent else 0) + len(link.records))

    async def load(self, ref: str) -> HistoryLink:
        self.reads += 1
        if ref not in self.blobs:
            raise FileNotFoundError(ref)
        return HistoryLink.model_validate_json(self.blobs[ref])


def _plain(transcript: Transcript) -> tuple[list[Prompt], list[PromptOutput]]:
    return transcript.history.records, transcript.outputs


def _round(number: int, changes: list[OutputChange] | None, count: int, **extra: object) -> RoundInput:
    fields: dict[str, object] = {"prompt": Prompt(id="p", user_id="u", input="q"), **extra}
    return RoundInput(round=number, changes=changes, output_count=count, run_id="r1", **fields)  # type: ignore[arg-type]


def test_the_pages_of_the_transcript_query_still_cover_everything() -> None:
    history, outputs = _history(), [_tool(10, 5000), TextOutput(text="t"), _tool(11, 5000)]
    pages = [build_page(history, outputs, 0, 300)]
    while pages[-1].next_start is not None:
        pages.append(build_page(history, outputs, pages[-1].next_start, 300))
    assert sum(len(p.items) for p in pages) == sum(len(p.output) for p in history) + len(outputs)


def test_apply_changes_detects_a_gap() -> None:
    outputs = [TextOutput(text="a")]
    assert apply_changes(outputs, [OutputChange(index=0, output=TextOutput(text="b")),
                                   OutputChange(index=1, output=TextOutput(text="c"))])
    assert outputs == [TextOutput(text="b"), TextOutput(text="c")]
    assert not apply_changes(outputs, [OutputChange(index=5, output=TextOutput(text="x"))])


def test_only_large_tool_outputs_travel_by_reference() -> None:
    small, large = _tool(1, 10), _tool(2, OUTPUT_REF_MIN_BYTES)
    assert change_for(0, small).result_ref is None and change_for(0, small).output == small
    change = change_for(1, large)
    assert change.result_ref == json_digest("x" * OUTPUT_REF_MIN_BYTES)
    assert isinstance(change.output, ToolOutput) and change.output.result == ToolSuccess(output=None)
    sub_agent = large.model_copy(update={"child_prompt_id": "child"})  # never produced by a tool activity
    assert change_for(2, sub_agent).result_ref is None


def test_no_activity_reads_a_workflow() -> None:
    """The worker's side takes the round's input and a link loader: no workflow handle, query or history read
    anywhere in the activities (tests/temporal/test_history_by_reference.py checks the same on a running worker)."""
    source = inspect.getsource(activities.transcripts)
    assert "client" not in source
    for module in Path(activities.__file__).parent.glob("*.py"):
        code = module.read_text()
        readings = (".query(", "get_workflow_handle", "fetch_history", "TRANSCRIPT_QUERY")
        if module.name == "heartbeats.py":  # its close watch long-polls the run's close event, no history
            assert code.count("get_workflow_handle") == code.count("fetch_history") == 1 and "CLOSE_EVENT" in code
            readings = (".query(", "TRANSCRIPT_QUERY")
        for reading in readings:
            assert reading not in code, f"{module.name} uses {reading}"
    assert list(inspect.signature(TranscriptCache.load).parameters) == ["self", "workflow_id", "inp", "load_link"]


async def test_consecutive_rounds_hit_and_a_gap_asks_for_the_whole_input() -> None:
    store, cache = _Store(), TranscriptCache()
    first = [_tool(1, 5000)]
    cache.outputs.remember(first[0].result)  # this worker ran the tool
    got = await cache.load("wf", _round(1, [], 0), store.load)
    assert _plain(got) == ([], [])
    got = await cache.load("wf", _round(2, [change_for(0, first[0])], 1), store.load)
    assert _plain(got) == ([], first) and cache.misses == 0
    # Round 3 ran on another worker; round 4 here only brings round 4's changes.
    with pytest.raises(TranscriptMissing):
        await cache.load("wf", _round(4, [OutputChange(index=2, output=TextOutput(text="later"))], 3), store.load)
    whole = [*first, TextOutput(text="mid"), TextOutput(text="later")]
    resent = _round(4, None, 3, prompt=Prompt(id="p", user_id="u", input="q", output=whole))
    assert _plain(await cache.load("wf", resent, store.load)) == ([], whole)
    got = await cache.load("wf", _round(5, [OutputChange(index=3, output=TextOutput(text="end"))], 4), store.load)
    assert _plain(got) == ([], [*whole, TextOutput(text="end")])


async def test_an_output_produced_elsewhere_is_a_miss_not_a_query() -> None:
    cache = TranscriptCache()
    with pytest.raises(TranscriptMissing, match="another worker"):
        await cache.load("wf", _round(1, [change_for(0, _tool(7, 5000))], 1), _Store().load)


async def test_conversation_history_resolves_from_the_store_once_per_worker() -> None:
    store, records = _Store(), _history()
    first = store.put(HistoryLink(records=records[:2]))
    second = store.put(HistoryLink(parent=first, records=records[2:3]))
    third = store.put(HistoryLink(parent=second, records=records[3:]))
    chain = HistoryChain()
    assert (await chain.resolve(second, store.load)).records == records[:3] and store.reads == 2
    resolved = await chain.resolve(third, store.load)
    assert resolved.records == records and store.reads == 3  # only the new link
    current = Prompt(id="now", user_id="u", input="now")
    assert [*resolved.messages, *project_prompt(current)] == project_prompts(records, current)
    cache = TranscriptCache(history=chain)
    got = await cache.load("wf", _round(1, [], 0, history_ref=third, history_count=4), store.load)
    assert _plain(got) == (records, []) and store.reads == 3
    got = await cache.load("wf", _round(2, [OutputChange(index=0, output=TextOutput(text="a"))], 1,
                                        history_ref=third, history_count=4), store.load)
    assert got.history.records == records and store.reads == 3


async def test_a_missing_link_is_reported_with_its_reference() -> None:
    with pytest.raises(HistoryBroken, match="sha256:gone"):
        await HistoryChain().resolve(HistoryRef(ref="sha256:gone", count=1), _Store().load)


_OUTPUTS = st.one_of(
    st.builds(lambda n: _tool(n, 10), st.integers(0, 99)),
    st.builds(lambda text: TextOutput(text=text), st.text(max_size=5)),
    st.builds(lambda n: ToolOutput(id=f"c{n}", tool="t.x", input={"n": n}, started_at=NOW,
                                   result=ApprovalRequest(reason="r", requested_at=NOW)), st.integers(0, 99)),
    st.builds(lambda n: ToolOutput(id=f"c{n}", tool="t.x", input={}, result=ToolError(error="boom"),
                                   started_at=NOW), st.integers(0, 99)),
)
# A round: ("changes", replaced indices' new outputs (index taken modulo the outputs so far), appended outputs)
# or ("whole",) for an input sent whole.
_ROUNDS = st.lists(st.one_of(
    st.tuples(st.just("changes"), st.lists(st.tuples(st.integers(0, 50), _OUTPUTS), max_size=3),
              st.lists(_OUTPUTS, max_size=3)),
    st.tuples(st.just("whole")),
), min_size=1, max_size=12)


@given(rounds=_ROUNDS)
@settings(max_examples=60, deadline=None)
def test_each_round_projects_what_changed_and_keeps_the_rest(rounds: list[tuple[object, ...]]) -> None:
    """The messages a round sends are the projection of all its outputs (`project_prompt` without the input),
    whatever mix of appended, replaced and whole inputs led there; an output unchanged since the last round is
    not projected again (its messages are the very objects of the last round)."""
    async def run() -> None:
        cache, store = TranscriptCache(), _Store()
        outputs: list[PromptOutput] = []
        last: Transcript | None = None
        for number, step in enumerate(rounds, start=1):
            if step[0] == "whole":
                outputs = [o.model_copy() for o in outputs]
                inp = _round(number, None, len(outputs), prompt=Prompt(id="p", user_id="u", input="q", output=outputs))
                unchanged: set[int] = set()
            else:
                _, replaced, appended = step
                changes = {i % len(outputs): o for i, o in replaced} if outputs else {}  # type: ignore[union-attr]
                changes |= {len(outputs) + k: o for k, o in enumerate(appended)}  # type: ignore[arg-type]
                unchanged = set(range(len(outputs))) - set(changes)
                inp = _round(number, [OutputChange(index=i, output=o) for i, o in sorted(changes.items())],
                             len(outputs) + len(appended))  # type: ignore[arg-type]
            got = await cache.load("wf", inp, store.load)
            outputs = list(got.outputs)
            assert got.messages == project_prompt(Prompt(id="p", user_id="u", input="", output=outputs))
            for i in unchanged:
                assert last is not None and got.projected[i] is last.projected[i]
            last = got
    asyncio.run(run())
