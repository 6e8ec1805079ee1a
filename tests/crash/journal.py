"""The activity journal the crash scenario's worker writes: which call started and ended in which process."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

# --------------------------------------------------------------------------------------------------
# the activity journal


class Journal:
    """Tails `journal.jsonl`: which model/tool calls are in flight, on which pid, and recent ends."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._rest = b""
        self.open: Counter[tuple[int, str, str]] = Counter()  # (pid, kind, key) -> attempts in flight
        self.starts: Counter[tuple[str, str]] = Counter()  # (kind, key) -> executions started
        self.last_end: dict[int, float] = {}  # pid -> time of its latest "end"

    def refresh(self) -> None:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return
        self._offset += len(data)
        lines = (self._rest + data).split(b"\n")
        self._rest = lines.pop()
        for raw in lines:
            try:
                line = json.loads(raw)
            except json.JSONDecodeError:
                continue
            slot = (int(line["pid"]), str(line["kind"]), str(line["key"]))
            if line["ev"] == "start":
                self.open[slot] += 1
                self.starts[(slot[1], slot[2])] += 1
            else:
                self.open[slot] -= 1
                if self.open[slot] <= 0:
                    del self.open[slot]
                self.last_end[slot[0]] = max(self.last_end.get(slot[0], 0.0), float(line["t"]))

    def in_flight(self, pid: int | None = None) -> list[tuple[int, str, str]]:
        return sorted(slot for slot in self.open if pid is None or slot[0] == pid)


def prompt_of(key: str) -> str:
    return key.split("/", 1)[0]
