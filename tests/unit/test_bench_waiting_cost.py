"""The bench's waiting section reports the server's cost of prompts brought to wait: its store's growth (SQLite
pages in use, read as another process would) and its CPU, per prompt, next to the baseline's."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from bench.config import BASELINE, PRODUCT
from bench.measure import store_bytes
from bench.report import Row, _waiting_rows


def test_the_store_in_use_grows_with_what_is_written_and_not_with_what_is_freed(tmp_path: Path) -> None:
    db_file = tmp_path / "server.db"
    assert store_bytes(db_file) is None and store_bytes(None) is None
    with sqlite3.connect(db_file) as db:
        db.execute("CREATE TABLE history (data BLOB)")
    empty = store_bytes(db_file)
    assert empty is not None
    with sqlite3.connect(db_file) as db:
        db.executemany("INSERT INTO history VALUES (?)", [(b"x" * 4000,)] * 100)
    full = store_bytes(db_file)
    assert full is not None and full - empty >= 100 * 4000
    with sqlite3.connect(db_file) as db:
        db.execute("DELETE FROM history")
    freed = store_bytes(db_file)
    assert freed is not None and freed < full - 100 * 4000 + 8192  # free pages are not counted


def _side(store: float, cpu: float) -> dict[str, object]:
    return {"waiting_rss": 2**27, "ratio": 1.3, "server_cpu_seconds": cpu, "server_store_bytes_per_prompt": store}


def test_the_waiting_rows_give_the_servers_cost_per_prompt() -> None:
    rows: list[Row] = []
    _waiting_rows(rows, lambda *args: "", {"prompts": 1000, PRODUCT: _side(3072, 20.0), BASELINE: _side(2048, 40.0)})
    by_metric = {row.metric.strip(): row for row in rows}
    store = by_metric["server store per waiting prompt (history + visibility)"]
    cpu = by_metric["server CPU per prompt brought to wait"]
    assert (store.product, store.baseline, store.ratio) == ("3.0 KiB", "2.0 KiB", "1.50x")
    assert (cpu.product, cpu.baseline, cpu.ratio) == (f"{20.0:.1f} ms", f"{40.0:.1f} ms", "0.50x")
