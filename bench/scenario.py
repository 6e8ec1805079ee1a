"""The benchmark scenario, shared by both sides: what the scripted model does and what the tool returns.

A prompt's input text carries its parameters, e.g. ``"bench rounds=20 size=10240 approve=1"``:

* ``rounds`` - how many tool rounds: every model call asks for one ``bench.echo`` call until ``rounds``
  tool results are in the transcript, then answers with text (so a prompt makes ``rounds + 1`` model
  calls and ``rounds`` tool calls);
* ``size`` - how many bytes of text the tool returns;
* ``approve`` - the 1-based tool round whose call needs a human's approval (0 = none);
* ``calls`` - tool calls per model response (default 1), and ``ms`` - how long each tool call takes.

Pure functions, no Temporal and no project imports: the baseline and the project's plugin both use them,
so both sides run exactly the same model logic.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

M = TypeVar("M")

TOOL_ID = "bench.echo"
FINAL_TEXT = "done"


@dataclass(frozen=True)
class Scenario:
    rounds: int
    size: int = 16
    approve: int = 0
    calls: int = 1
    ms: int = 0

    def text(self) -> str:
        extra = f" calls={self.calls} ms={self.ms}" if (self.calls, self.ms) != (1, 0) else ""
        return f"bench rounds={self.rounds} size={self.size} approve={self.approve}{extra}"

    @classmethod
    def parse(cls, text: str | None) -> Scenario:
        values = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", text or "")}
        return cls(rounds=values.get("rounds", 1), size=values.get("size", 16), approve=values.get("approve", 0),
                   calls=values.get("calls", 1), ms=values.get("ms", 0))


@dataclass(frozen=True)
class NextStep:
    """What the model does next: call the tool with `arguments`, or finish with `text`."""

    arguments: dict[str, int | bool] | None
    text: str | None = None
    more: tuple[dict[str, int | bool], ...] = ()  # further calls of the same response (``calls`` > 1)

    @property
    def calls(self) -> list[dict[str, int | bool]]:
        return [] if self.arguments is None else [self.arguments, *self.more]


def next_step(scenario: Scenario, tool_results_so_far: int) -> NextStep:
    rounds_done = tool_results_so_far // scenario.calls
    if rounds_done >= scenario.rounds:
        return NextStep(arguments=None, text=FINAL_TEXT)
    seq = rounds_done + 1
    first: dict[str, int | bool] = {"seq": seq, "size": scenario.size, "approve": seq == scenario.approve}
    if scenario.ms:
        first["ms"] = scenario.ms
    return NextStep(arguments=first, more=tuple({**first, "n": n} for n in range(1, scenario.calls)))


def current_turn(messages: Sequence[M], is_user: Callable[[M], bool],
                 is_tool_result: Callable[[M], bool]) -> tuple[M | None, int]:
    """The turn a model call answers: the last user message (None if there is none) and how many tool results
    follow it. Found from the end, so a long conversation's earlier turns are not walked."""
    for index in range(len(messages) - 1, -1, -1):
        if is_user(messages[index]):
            return messages[index], sum(1 for m in messages[index + 1:] if is_tool_result(m))
    return None, sum(1 for m in messages if is_tool_result(m))


def tool_output(seq: int, size: int) -> str:
    """The trivial tool: `size` bytes of text."""
    head = f"result {seq}:"
    return head + "x" * max(0, size - len(head))
