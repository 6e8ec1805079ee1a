"""The benchmark scenario, shared by both sides: what the scripted model does and what the tool returns.

A prompt's input text carries its parameters, e.g. ``"bench rounds=20 size=10240 approve=1"``:

* ``rounds`` - how many tool rounds: every model call asks for one ``bench.echo`` call until ``rounds``
  tool results are in the transcript, then answers with text (so a prompt makes ``rounds + 1`` model
  calls and ``rounds`` tool calls);
* ``size`` - how many bytes of text the tool returns;
* ``approve`` - the 1-based tool round whose call needs a human's approval (0 = none).

Pure functions, no Temporal and no project imports: the baseline and the project's plugin both use them,
so both sides run exactly the same model logic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TOOL_ID = "bench.echo"
FINAL_TEXT = "done"


@dataclass(frozen=True)
class Scenario:
    rounds: int
    size: int = 16
    approve: int = 0

    def text(self) -> str:
        return f"bench rounds={self.rounds} size={self.size} approve={self.approve}"

    @classmethod
    def parse(cls, text: str | None) -> Scenario:
        values = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", text or "")}
        return cls(rounds=values.get("rounds", 1), size=values.get("size", 16), approve=values.get("approve", 0))


@dataclass(frozen=True)
class NextStep:
    """What the model does next: call the tool with `arguments`, or finish with `text`."""

    arguments: dict[str, int | bool] | None
    text: str | None = None


def next_step(scenario: Scenario, tool_results_so_far: int) -> NextStep:
    if tool_results_so_far >= scenario.rounds:
        return NextStep(arguments=None, text=FINAL_TEXT)
    seq = tool_results_so_far + 1
    return NextStep(arguments={"seq": seq, "size": scenario.size, "approve": seq == scenario.approve})


def tool_output(seq: int, size: int) -> str:
    """The trivial tool: `size` bytes of text."""
    head = f"result {seq}:"
    return head + "x" * max(0, size - len(head))
