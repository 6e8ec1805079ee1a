"""The transcript the model round rebuilds from changes, a cache, or the paged `transcript` query."""

from __future__ import annotations

from datetime import UTC, datetime

from activities.transcripts import TranscriptCache
from agent.models import Prompt, TextOutput, ToolOutput, ToolSuccess
from workflows.protocol import OutputChange, RoundInput, TranscriptPage, TranscriptPageRequest
from workflows.transcript import apply_changes, assemble, build_page

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _tool(i: int, size: int = 100) -> ToolOutput:
    return ToolOutput(id=f"c{i}", tool="t.x", input={}, result=ToolSuccess(output="x" * size), started_at=NOW,
                      finished_at=NOW)


def _history() -> list[Prompt]:
    return [Prompt(id=f"p{n}", user_id="u", input=f"q{n}", output=[TextOutput(text=f"a{n}"), _tool(n)])
            for n in range(3)] + [Prompt(id="empty", user_id="u", input="nothing happened")]


def test_pages_reassemble_exactly_whatever_the_page_size() -> None:
    history, outputs = _history(), [_tool(10, 5000), TextOutput(text="t"), _tool(11, 5000)]
    for max_bytes in (1, 300, 5200, 10_000_000):
        pages = [build_page(history, outputs, 0, max_bytes)]
        while pages[-1].next_start is not None:
            pages.append(build_page(history, outputs, pages[-1].next_start, max_bytes))
        rebuilt_history, rebuilt_outputs = assemble(pages)
        assert rebuilt_history == history and rebuilt_outputs == outputs
        if max_bytes == 1:
            assert len(pages) == 9  # one item per page: a page always makes progress


def test_apply_changes_detects_a_gap() -> None:
    outputs = [TextOutput(text="a")]
    assert apply_changes(outputs, [OutputChange(index=0, output=TextOutput(text="b")),
                                   OutputChange(index=1, output=TextOutput(text="c"))])
    assert outputs == [TextOutput(text="b"), TextOutput(text="c")]
    assert not apply_changes(outputs, [OutputChange(index=5, output=TextOutput(text="x"))])


async def test_cache_hits_on_consecutive_rounds_and_queries_on_a_miss() -> None:
    history = _history()
    workflow_outputs = [_tool(1), _tool(2), TextOutput(text="later")]
    fetched: list[int] = []

    async def fetch(inp: RoundInput, request: TranscriptPageRequest) -> TranscriptPage:
        fetched.append(request.start)
        return build_page(history, workflow_outputs[: inp.output_count], request.start, 400)

    cache = TranscriptCache(fetch)
    header = Prompt(id="p", user_id="u", input="q")

    def round_input(number: int, changes: list[OutputChange], count: int) -> RoundInput:
        return RoundInput(prompt=header, round=number, changes=changes, output_count=count,
                          history_count=len(history), run_id="r1")

    got = await cache.load("wf", round_input(1, [], 0))  # history needed: a miss, read page by page
    assert got == (history, []) and cache.misses == 1 and len(fetched) > 1
    fetched.clear()
    got = await cache.load("wf", round_input(2, [OutputChange(index=0, output=workflow_outputs[0])], 1))
    assert got == (history, workflow_outputs[:1]) and cache.hits == 1 and not fetched
    # Round 3 ran elsewhere; round 4 here only has round 4's changes: a miss, and the query fills the gap.
    got = await cache.load("wf", round_input(4, [OutputChange(index=2, output=workflow_outputs[2])], 3))
    assert got == (history, workflow_outputs) and cache.misses == 2 and fetched


async def test_first_round_without_history_needs_no_query() -> None:
    async def fetch(inp: RoundInput, request: TranscriptPageRequest) -> TranscriptPage:
        raise AssertionError("no query expected")

    cache = TranscriptCache(fetch)
    inp = RoundInput(prompt=Prompt(id="p", user_id="u"), round=1, changes=[], output_count=0, run_id="r")
    assert await cache.load("wf", inp) == ([], [])
