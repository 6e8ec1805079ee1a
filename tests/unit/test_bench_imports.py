"""Every benchmark module imports: a bench that a refactor broke is found here, not when someone runs it."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.mark.parametrize("module", sorted(p.stem for p in BENCH.glob("*.py") if p.stem != "__init__"))
def test_bench_module_imports(module: str) -> None:
    imported = importlib.import_module(f"bench.{module}")
    assert imported.__name__ == f"bench.{module}"
