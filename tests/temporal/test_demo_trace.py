"""`dagent demo --trace`: the quick start prints its prompt's span tree (embedded dev server, real worker)."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from durable_agent.cli.demo import run_demo

DEMO_TEXT = "Plan my Paris trip: check the weather, write me a short report and pay the $250 hotel deposit."


async def test_demo_trace_prints_the_span_tree(tmp_path: Path) -> None:
    out = io.StringIO()
    console = Console(file=out, width=200, highlight=False, markup=False)
    code = await run_demo(db_file=tmp_path / "demo.db", keep=False, interactive=False, console=console,
                          input_text=DEMO_TEXT, trace=True)
    text = out.getvalue()
    assert code == 0, text
    tree = text[text.index("Trace "):].splitlines()[1:]
    names = [line.strip().split("  ")[0] for line in tree if line.startswith("  ")]
    depth = {line.strip().split("  ")[0]: (len(line) - len(line.lstrip())) // 2 for line in tree
             if line.startswith("  ")}
    invoke = names[1]
    assert names[0] == "dagent.prompt.start" and invoke.startswith("invoke_agent "), text
    assert depth[invoke] == depth["dagent.prompt.start"] + 1
    assert depth["dagent.round"] == depth[invoke] + 1
    assert depth["dagent.approval"] == depth["dagent.tool_call"] + 1
    assert depth["execute_tool payment.send"] == depth["dagent.tool_call"] + 1
    assert any(n.startswith("chat ") for n in names)
    assert "decided_by=quickstart-approver" in text and "outcome=success" in text
    assert "Paris trip" not in "\n".join(tree), "no prompt text in the spans"
    assert "webhook approval.requested: payment.send" in text and "(signature verified)" in text  # telling approvers
    assert "told    webhook requested -> role:approver" in text
