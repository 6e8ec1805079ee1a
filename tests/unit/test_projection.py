"""Projection (prompt record -> neutral messages) and each adapter's exact payload for the same history."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from typing import Any

from durable_agent.agent import models as m
from durable_agent.agent.messages import (
    AssistantMessage,
    Message,
    ModelRequest,
    ToolCallMessage,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from durable_agent.agent.model_settings import ModelSettings
from durable_agent.agent.projection import project_output, project_prompt, project_prompts
from durable_agent.agent.providers import anthropic_messages, openai_chat, openai_responses
from durable_agent.agent.providers.naming import ToolNameMap

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def tool(call_id: str, tool_id: str, args: Any, result: Any) -> m.ToolOutput:
    return m.ToolOutput(id=call_id, tool=tool_id, input=args, result=result, started_at=T0,
                      finished_at=None if result is None else T0)


# --- projection over every output type ------------------------------------------------------------


def test_text() -> None:
    assert project_output(m.TextOutput(text="Hello")) == [AssistantMessage(text="Hello")]
    assert project_output(m.TextOutput(text="")) == []


def test_tool_success() -> None:
    entry = tool("c1", "weather.get", {"city": "Paris"}, m.ToolSuccess(output={"temp_c": 18, "sky": "clear"}))
    assert project_output(entry) == [
        ToolCallMessage(call_id="c1", tool="weather.get", arguments={"city": "Paris"}),
        ToolResultMessage(call_id="c1", tool="weather.get", content='{"temp_c":18,"sky":"clear"}'),
    ]
    as_text = tool("c2", "echo", {}, m.ToolSuccess(output="plain text"))
    assert project_output(as_text)[1] == ToolResultMessage(call_id="c2", tool="echo", content="plain text")


def test_tool_error_is_marked() -> None:
    entry = tool("c1", "trigger.create", {"when": "rain"}, m.ToolError(error="quota exceeded"))
    assert project_output(entry) == [
        ToolCallMessage(call_id="c1", tool="trigger.create", arguments={"when": "rain"}),
        ToolResultMessage(call_id="c1", tool="trigger.create", content="Error: quota exceeded",
                          is_error=True),
    ]


def test_pending_and_in_flight_tools_are_skipped() -> None:
    pending = tool("c1", "trigger.delete", {}, m.ApprovalRequest(reason="needs approval", requested_at=T0))
    in_flight = tool("c2", "weather.get", {"city": "Nice"}, None)
    assert project_output(pending) == []
    assert project_output(in_flight) == []


def test_file_is_summarised() -> None:
    entry = m.FileOutput(tool_call_id="c1", name="paris.csv", media_type="text/csv", size=120,
                       content_ref="blob://1", summary="hourly temperatures")
    assert project_output(entry) == [
        AssistantMessage(text="[file paris.csv (text/csv, 120 bytes)] hourly temperatures")
    ]


def test_widget_is_skipped() -> None:
    entry = m.WidgetOutput(widget="weather_card", data={"temp_c": 18}, fallback_text="18°C")
    assert project_output(entry) == []


def test_message_outputs_become_user_messages() -> None:
    assert project_output(m.MessageOutput(text="Use Celsius please.")) == [UserMessage(text="Use Celsius please.")]
    note = m.MessageOutput(role="system", text="The answer did not match the schema.", source="output_validation")
    assert project_output(note) == [UserMessage(text="[system] The answer did not match the schema.")]


def test_steer_after_tool_result_keeps_anthropic_valid() -> None:
    prompt = m.Prompt(id="p", user_id="u", input="Weather?", output=[
        tool("c1", "weather.get", {"city": "Paris"}, m.ToolSuccess(output="18")),
        m.MessageOutput(text="Actually, Lyon."),
    ])
    request = ModelRequest(messages=project_prompt(prompt))
    messages = anthropic_messages.build_messages(request, names=ToolNameMap.for_request(request))
    assert messages[-1] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "c1", "content": "18"},
        {"type": "text", "text": "Actually, Lyon."},
    ]}
    assert_anthropic_invariants(messages)


def test_data_is_json() -> None:
    assert project_output(m.DataOutput(data={"ok": True, "items": [1, "é"]})) == [
        AssistantMessage(text='{"ok":true,"items":[1,"é"]}')
    ]


# --- one realistic history ------------------------------------------------------------------------

HISTORY = m.Prompt(
    id="p1", user_id="u", input="What's the weather in Paris?",
    output=[
        m.TextOutput(text="Let me check."),
        tool("call_1", "weather.get", {"city": "Paris"}, m.ToolSuccess(output={"temp_c": 18})),
        m.FileOutput(tool_call_id="call_1", name="paris.csv", media_type="text/csv", size=120,
                   content_ref="blob://1", summary="hourly temperatures"),
        m.WidgetOutput(tool_call_id="call_1", widget="weather_card", data={"temp_c": 18}),
        m.TextOutput(text="It is 18°C in Paris."),
        m.DataOutput(data={"city": "Paris", "temp_c": 18}),
    ],
)
CURRENT = m.Prompt(
    id="p2", user_id="u", input="Create a rain trigger and check Lyon.",
    output=[
        tool("call_2", "trigger.create", {"when": "rain"}, m.ToolError(error="quota exceeded")),
        tool("call_3", "weather.get", {"city": "Lyon"}, m.ToolSuccess(output="sunny")),
        tool("call_4", "trigger.delete", {}, m.ApprovalRequest(reason="approval", requested_at=T0)),
        tool("call_5", "weather.get", {"city": "Nice"}, None),
    ],
)
FILE_TEXT = "[file paris.csv (text/csv, 120 bytes)] hourly temperatures"
TOOLS = [
    ToolSpec(id="weather.get", description="Weather for a city",
             parameters={"type": "object", "properties": {"city": {"type": "string"}}}),
    ToolSpec(id="trigger.create", description="Create a trigger", parameters={}),
]
EXPECTED_MESSAGES: list[Message] = [
    UserMessage(text="What's the weather in Paris?"),
    AssistantMessage(text="Let me check."),
    ToolCallMessage(call_id="call_1", tool="weather.get", arguments={"city": "Paris"}),
    ToolResultMessage(call_id="call_1", tool="weather.get", content='{"temp_c":18}'),
    AssistantMessage(text=FILE_TEXT),
    AssistantMessage(text="It is 18°C in Paris."),
    AssistantMessage(text='{"city":"Paris","temp_c":18}'),
    UserMessage(text="Create a rain trigger and check Lyon."),
    ToolCallMessage(call_id="call_2", tool="trigger.create", arguments={"when": "rain"}),
    ToolResultMessage(call_id="call_2", tool="trigger.create", content="Error: quota exceeded",
                      is_error=True),
    ToolCallMessage(call_id="call_3", tool="weather.get", arguments={"city": "Lyon"}),
    ToolResultMessage(call_id="call_3", tool="weather.get", content="sunny"),
]


def projected_request() -> ModelRequest:
    return ModelRequest(instructions="Be brief.", messages=project_prompts([HISTORY], CURRENT), tools=TOOLS,
                        round=2)


def test_project_prompts() -> None:
    assert project_prompts([HISTORY], CURRENT) == EXPECTED_MESSAGES
    assert project_prompt(m.Prompt(id="p", user_id="u")) == []


def test_responses_payload() -> None:
    request = projected_request()
    kwargs = openai_responses.build_request(request, model="gpt-test", names=ToolNameMap.for_request(request))
    assert kwargs == {
        "model": "gpt-test",
        "store": False,
        "instructions": "Be brief.",
        "input": [
            {"role": "user", "content": "What's the weather in Paris?"},
            {"role": "assistant", "content": "Let me check."},
            {"type": "function_call", "call_id": "call_1", "name": "weather_get",
             "arguments": '{"city":"Paris"}'},
            {"type": "function_call_output", "call_id": "call_1", "output": '{"temp_c":18}'},
            {"role": "assistant", "content": FILE_TEXT},
            {"role": "assistant", "content": "It is 18°C in Paris."},
            {"role": "assistant", "content": '{"city":"Paris","temp_c":18}'},
            {"role": "user", "content": "Create a rain trigger and check Lyon."},
            {"type": "function_call", "call_id": "call_2", "name": "trigger_create",
             "arguments": '{"when":"rain"}'},
            {"type": "function_call_output", "call_id": "call_2", "output": "Error: quota exceeded"},
            {"type": "function_call", "call_id": "call_3", "name": "weather_get",
             "arguments": '{"city":"Lyon"}'},
            {"type": "function_call_output", "call_id": "call_3", "output": "sunny"},
        ],
        "tools": [
            {"type": "function", "name": "weather_get", "description": "Weather for a city",
             "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}, "strict": False},
            {"type": "function", "name": "trigger_create", "description": "Create a trigger",
             "parameters": {"type": "object", "properties": {}}, "strict": False},
        ],
    }


def test_chat_payload() -> None:
    request = projected_request()
    kwargs = openai_chat.build_request(request, model="llama", names=ToolNameMap.for_request(request))

    def call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
        return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}

    assert kwargs["model"] == "llama"
    assert kwargs["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": "Let me check.",
         "tool_calls": [call("call_1", "weather_get", '{"city":"Paris"}')]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"temp_c":18}'},
        {"role": "assistant",
         "content": f'{FILE_TEXT}\n\nIt is 18°C in Paris.\n\n{{"city":"Paris","temp_c":18}}'},
        {"role": "user", "content": "Create a rain trigger and check Lyon."},
        {"role": "assistant", "content": None,
         "tool_calls": [call("call_2", "trigger_create", '{"when":"rain"}')]},
        {"role": "tool", "tool_call_id": "call_2", "content": "Error: quota exceeded"},
        {"role": "assistant", "content": None,
         "tool_calls": [call("call_3", "weather_get", '{"city":"Lyon"}')]},
        {"role": "tool", "tool_call_id": "call_3", "content": "sunny"},
    ]
    assert kwargs["tools"] == [
        {"type": "function", "function": {"name": "weather_get", "description": "Weather for a city",
                                          "parameters": TOOLS[0].parameters}},
        {"type": "function", "function": {"name": "trigger_create", "description": "Create a trigger",
                                          "parameters": {"type": "object", "properties": {}}}},
    ]


def test_chat_merges_parallel_calls_after_text() -> None:
    request = ModelRequest(messages=[
        UserMessage(text="both?"),
        AssistantMessage(text="Checking."),
        ToolCallMessage(call_id="a", tool="weather.get", arguments={"city": "Paris"}),
        ToolCallMessage(call_id="b", tool="weather.get", arguments=None),
        ToolResultMessage(call_id="a", tool="weather.get", content="18"),
        ToolResultMessage(call_id="b", tool="weather.get", content="20"),
    ])
    messages = openai_chat.build_messages(request, names=ToolNameMap.for_request(request))
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool"]
    assert messages[1]["content"] == "Checking."
    assert [c["id"] for c in messages[1]["tool_calls"]] == ["a", "b"]
    assert messages[1]["tool_calls"][1]["function"]["arguments"] == "{}"


def test_anthropic_payload() -> None:
    request = projected_request().model_copy(update={"settings": ModelSettings(prompt_cache=False)})
    kwargs = anthropic_messages.build_request(request, model="claude", names=ToolNameMap.for_request(request))
    assert kwargs["model"] == "claude"
    assert kwargs["max_tokens"] == 4096
    assert kwargs["system"] == "Be brief."
    assert kwargs["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "What's the weather in Paris?"}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "call_1", "name": "weather_get", "input": {"city": "Paris"}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "call_1", "content": '{"temp_c":18}'},
        ]},
        {"role": "assistant", "content": [
            {"type": "text", "text": FILE_TEXT},
            {"type": "text", "text": "It is 18°C in Paris."},
            {"type": "text", "text": '{"city":"Paris","temp_c":18}'},
        ]},
        {"role": "user", "content": [{"type": "text", "text": "Create a rain trigger and check Lyon."}]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "call_2", "name": "trigger_create", "input": {"when": "rain"}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "call_2", "content": "Error: quota exceeded",
             "is_error": True},
        ]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "call_3", "name": "weather_get", "input": {"city": "Lyon"}},
        ]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_3", "content": "sunny"}]},
    ]
    assert kwargs["tools"] == [
        {"name": "weather_get", "description": "Weather for a city", "input_schema": TOOLS[0].parameters},
        {"name": "trigger_create", "description": "Create a trigger",
         "input_schema": {"type": "object", "properties": {}}},
    ]
    assert_anthropic_invariants(kwargs["messages"])


def test_anthropic_merges_results_then_user_text() -> None:
    request = ModelRequest(messages=[
        UserMessage(text="both?"),
        ToolCallMessage(call_id="a", tool="x.y", arguments={}),
        ToolCallMessage(call_id="b", tool="x.y", arguments=None),
        ToolResultMessage(call_id="a", tool="x.y", content="1"),
        ToolResultMessage(call_id="b", tool="x.y", content="2", is_error=True),
        UserMessage(text="and now?"),
    ])
    messages = anthropic_messages.build_messages(request, names=ToolNameMap.for_request(request))
    assert messages == [
        {"role": "user", "content": [{"type": "text", "text": "both?"}]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "a", "name": "x_y", "input": {}},
            {"type": "tool_use", "id": "b", "name": "x_y", "input": {}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "a", "content": "1"},
            {"type": "tool_result", "tool_use_id": "b", "content": "2", "is_error": True},
            {"type": "text", "text": "and now?"},
        ]},
    ]
    assert_anthropic_invariants(messages)


def assert_anthropic_invariants(messages: list[dict[str, Any]]) -> None:
    roles = [m["role"] for m in messages]
    assert roles[0] == "user"
    assert all(a != b for a, b in itertools.pairwise(roles)), roles
    for i, message in enumerate(messages):
        results = [b["tool_use_id"] for b in message["content"] if b["type"] == "tool_result"]
        if not results:
            continue
        previous = messages[i - 1]
        assert previous["role"] == "assistant"
        uses = {b["id"] for b in previous["content"] if b["type"] == "tool_use"}
        assert set(results) <= uses
        kinds = [b["type"] for b in message["content"]]
        assert kinds == sorted(kinds, key=lambda k: k != "tool_result")  # tool results come first


def test_payloads_for_same_history_agree_on_names() -> None:
    request = projected_request()
    names = ToolNameMap.for_request(request)
    responses = openai_responses.build_request(request, model="m", names=names)
    chat = openai_chat.build_request(request, model="m", names=names)
    claude = anthropic_messages.build_request(request, model="m", names=names)
    sent = {
        "responses": sorted({i["name"] for i in responses["input"] if i.get("type") == "function_call"}),
        "chat": sorted({c["function"]["name"] for m in chat["messages"] for c in m.get("tool_calls", [])}),
        "anthropic": sorted({b["name"] for m in claude["messages"] for b in m["content"]
                             if b["type"] == "tool_use"}),
    }
    assert sent == {"responses": ["trigger_create", "weather_get"], "chat": ["trigger_create", "weather_get"],
                    "anthropic": ["trigger_create", "weather_get"]}
