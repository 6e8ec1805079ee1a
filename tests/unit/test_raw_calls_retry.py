"""Every raw service call in the product asks for the SDK's retries (`retry=True`).

The SDK's own client methods pass `retry=True`; a raw `client.workflow_service.<rpc>(request)` does not unless
told, so a call whose connection the server closes under it (its maximum connection age, 5 minutes by
default) fails with CANCELLED "operation was canceled" instead of being sent again: CI once failed that way in
`AgentClient.pending`. tests/temporal/test_cut_off_calls.py shows it on a real server; this finds the calls."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("agent", "workflows", "activities", "workers", "client", "api", "cli", "plugins")
SERVICES = {"workflow_service", "operator_service", "test_service", "cloud_service"}


def _raw_calls_without_retry(source: str) -> list[int]:
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        target = node.func.value
        if not (isinstance(target, ast.Attribute) and target.attr in SERVICES):
            continue
        retry = next((k.value for k in node.keywords if k.arg == "retry"), None)
        if not (isinstance(retry, ast.Constant) and retry.value is True):
            lines.append(node.lineno)
    return lines


def test_the_finder_sees_a_raw_call_without_retry() -> None:
    assert _raw_calls_without_retry("async def f(c):\n    await c.workflow_service.describe_namespace(r)\n") == [2]
    assert _raw_calls_without_retry("c.operator_service.list_search_attributes(r, retry=False)") == [1]
    assert _raw_calls_without_retry("c.workflow_service.list_workflow_executions(r, retry=True)") == []


def test_every_raw_service_call_of_the_product_retries() -> None:
    found = {str(path.relative_to(ROOT)): lines
             for package in PRODUCT for path in sorted((ROOT / package).rglob("*.py"))
             if (lines := _raw_calls_without_retry(path.read_text()))}
    assert found == {}, f"raw service calls without retry=True (file: lines): {found}"
    assert any("workflow_service." in path.read_text() for path in (ROOT / "client").rglob("*.py"))
