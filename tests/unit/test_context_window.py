"""The sliding context window: oldest history goes first, tool calls and results never come apart."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from durable_agent.agent.context_window import (
    ContextLimit,
    estimate_tokens,
    estimate_total_tokens,
    split_units,
    trim_messages,
)
from durable_agent.agent.messages import (
    AssistantMessage,
    Message,
    ModelRequest,
    ReasoningMessage,
    ToolCallMessage,
    ToolResultMessage,
    UserMessage,
)
from durable_agent.agent.providers.scripted import estimate_usage, text


def user(text: str = "hi") -> UserMessage:
    return UserMessage(text=text)


def assistant(text: str = "ok") -> AssistantMessage:
    return AssistantMessage(text=text)


def call(call_id: str, tool: str = "t.x") -> ToolCallMessage:
    return ToolCallMessage(call_id=call_id, tool=tool, arguments={"q": call_id})


def result(call_id: str, content: str = "done", tool: str = "t.x") -> ToolResultMessage:
    return ToolResultMessage(call_id=call_id, tool=tool, content=content)


# --- a brute-force oracle ------------------------------------------------------------------------


def balanced(messages: Sequence[Message]) -> bool:
    calls = {m.call_id for m in messages if isinstance(m, ToolCallMessage)}
    results = {m.call_id for m in messages if isinstance(m, ToolResultMessage)}
    return calls == results


def fits(messages: Sequence[Message], limit: ContextLimit) -> bool:
    if limit.max_messages is not None and len(messages) > limit.max_messages:
        return False
    return limit.max_tokens is None or estimate_total_tokens(messages) <= limit.max_tokens


def expected_trim(messages: list[Message], limit: ContextLimit) -> list[Message]:
    """The longest balanced suffix not starting with a result that fits; else the shortest balanced suffix."""
    suffixes = [messages[i:] for i in range(len(messages))]  # longest first
    valid = [s for s in suffixes if balanced(s) and not isinstance(s[0], ToolResultMessage)]
    for suffix in valid:
        if fits(suffix, limit):
            return suffix
    return min((s for s in suffixes if balanced(s)), key=len)


# --- random well-formed histories ----------------------------------------------------------------

texts = st.text(alphabet="abcdefghij klmnop", max_size=120)


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    """User/assistant turns and tool batches; a batch may run calls in parallel and finish them in any order."""
    messages: list[Message] = []
    next_id = 0
    for kind in draw(st.lists(st.sampled_from(["user", "assistant", "tools"]), min_size=1, max_size=14)):
        if kind == "user":
            messages.append(user(draw(texts)))
        elif kind == "assistant":
            messages.append(assistant(draw(texts)))
        else:
            ids = [f"c{next_id + i}" for i in range(draw(st.integers(1, 4)))]
            next_id += len(ids)
            waiting: list[str] = []
            to_call = list(ids)
            chatter = 0
            while to_call or waiting:
                # Either start the next call, or finish one already started (any of them), or say something.
                options = (["call"] if to_call else []) + (["result"] if waiting else []) + (
                    ["text"] if chatter < 2 else [])
                step = draw(st.sampled_from(options))
                if step == "call":
                    waiting.append(to_call.pop(0))
                    messages.append(call(waiting[-1]))
                elif step == "result":
                    done = waiting.pop(draw(st.integers(0, len(waiting) - 1)))
                    messages.append(result(done, draw(texts)))
                else:
                    chatter += 1
                    messages.append(assistant(draw(texts)))
    return messages


limits = st.builds(
    ContextLimit,
    max_messages=st.none() | st.integers(1, 30),
    max_tokens=st.none() | st.integers(1, 400),
)


@settings(max_examples=250, deadline=None, database=None)
@given(messages=histories(), limit=limits)
def test_trim_properties(messages: list[Message], limit: ContextLimit) -> None:
    trimmed = trim_messages(messages, limit)
    # A suffix of the input: order kept, only the oldest dropped, the newest message kept.
    assert trimmed and trimmed == messages[len(messages) - len(trimmed):]
    assert trimmed[-1] is messages[-1]
    # Every call has its result and every result its call.
    assert balanced(trimmed)
    assert not isinstance(trimmed[0], ToolResultMessage)
    # Within the limit, unless the newest unit alone is over it (then exactly that unit is kept).
    newest_unit = messages[split_units(messages)[-1][0]:]
    assert fits(trimmed, limit) or trimmed == newest_unit
    # And nothing more was dropped than necessary.
    assert trimmed == expected_trim(messages, limit)


@settings(max_examples=100, deadline=None, database=None)
@given(messages=histories())
def test_units_partition_the_list_and_are_balanced(messages: list[Message]) -> None:
    units = split_units(messages)
    assert units[0][0] == 0 and units[-1][1] == len(messages)
    for (_, end), (start, _) in pairwise(units):
        assert end == start
    for start, end in units:
        assert balanced(messages[start:end])


# --- examples ------------------------------------------------------------------------------------


def test_no_limit_keeps_everything() -> None:
    messages: list[Message] = [user(), call("a"), result("a"), assistant()]
    assert trim_messages(messages, ContextLimit()) == messages
    assert trim_messages([], ContextLimit(max_messages=1)) == []


def test_max_messages_drops_oldest_and_keeps_pairs_whole() -> None:
    messages: list[Message] = [user("q"), call("a"), result("a"), assistant("answer")]
    assert trim_messages(messages, ContextLimit(max_messages=3)) == messages[1:]
    # Two would split the pair: the pair goes as a whole.
    assert trim_messages(messages, ContextLimit(max_messages=2)) == [assistant("answer")]


def test_parallel_calls_travel_together() -> None:
    messages: list[Message] = [user(), call("a"), call("b"), result("b"), assistant("meanwhile"), result("a"),
                               assistant("done")]
    assert split_units(messages) == [(0, 1), (1, 6), (6, 7)]
    assert trim_messages(messages, ContextLimit(max_messages=6)) == messages[1:]
    assert trim_messages(messages, ContextLimit(max_messages=5)) == messages[-1:]


def test_oversized_newest_unit_is_kept_anyway() -> None:
    big = user("x" * 4000)
    assert trim_messages([user("old"), big], ContextLimit(max_tokens=10)) == [big]
    pair: list[Message] = [call("a"), result("a", "y" * 4000)]
    assert trim_messages([user("old"), *pair], ContextLimit(max_messages=1, max_tokens=5)) == pair


def test_token_limit_counts_characters_over_four() -> None:
    assert estimate_tokens(user("abcdefgh")) == 2
    assert estimate_tokens(user("abcdefghi")) == 3
    assert estimate_tokens(assistant("")) == 1
    assert estimate_tokens(result("a", "abcd", tool="t")) == 2
    messages: list[Message] = [user("a" * 40), user("b" * 40), user("c" * 40)]  # 10 tokens each
    assert trim_messages(messages, ContextLimit(max_tokens=20)) == messages[1:]
    assert trim_messages(messages, ContextLimit(max_tokens=19)) == messages[2:]


def test_orphan_result_never_leads() -> None:
    # Malformed input (a result whose call is gone): it is dropped rather than sent first.
    messages: list[Message] = [user(), result("lost"), assistant("a"), assistant("b")]
    assert trim_messages(messages, ContextLimit(max_messages=3)) == messages[2:]


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValidationError):
        ContextLimit(max_messages=0)
    with pytest.raises(ValidationError):
        ContextLimit(max_tokens=-1)
    assert ContextLimit().unlimited and not ContextLimit(max_tokens=5).unlimited


def test_a_message_counts_its_characters_once_and_the_scripted_model_uses_the_same_count() -> None:
    messages: list[Message] = [user("héllo"), call("c1", tool="t.x"), result("c1", content="done"), assistant("ok"),
                               ReasoningMessage(provider="openai", item={"summary": "ü"})]
    assert [m.chars for m in messages] == [5, len("t.x") + len('{"q": "c1"}'), len("t.x") + 4, 2,
                                           len('{"summary": "ü"}')]
    tool_call = messages[1]
    assert "chars" in tool_call.__dict__  # kept: a later round does not serialize the arguments again
    assert tool_call == call("c1") and tool_call.model_dump() == call("c1").model_dump()  # not a field
    usage = estimate_usage(ModelRequest(instructions="four", messages=messages), text("x"))
    assert usage.input_tokens == (4 + sum(m.chars for m in messages)) // 4
