"""Billable actions as the Temporal server counts them: its `action` metric (labels `action_type`, `namespace`),
the basis of Temporal Cloud's billing, read from the `/metrics` endpoint of a dev server started with
`--metrics-port`. The server exports the counter with a delay of a second or two, so `settled` reads it until it
stops moving."""

from __future__ import annotations

import asyncio
import re
import time
import urllib.request
from collections import Counter

ACTION_LINE = re.compile(r'^action\{(?P<labels>[^}]*)\}\s+(?P<value>[0-9.e+]+)$')
LABEL = re.compile(r'(\w+)="([^"]*)"')
HEARTBEAT = "grpc_RecordActivityTaskHeartbeat"


def read_actions(metrics_url: str, namespace: str = "default") -> Counter[str]:
    """Actions of `namespace` so far, by action type (e.g. `grpc_RecordActivityTaskHeartbeat`)."""
    with urllib.request.urlopen(metrics_url, timeout=10) as response:
        text = response.read().decode()
    counts: Counter[str] = Counter()
    for line in text.splitlines():
        match = ACTION_LINE.match(line)
        if match is None:
            continue
        labels = dict(LABEL.findall(match["labels"]))
        if labels.get("namespace") == namespace:
            counts[labels.get("action_type", "?")] += int(float(match["value"]))
    return counts


async def settled(metrics_url: str, namespace: str = "default", *, quiet_seconds: float = 2.5,
                  timeout: float = 30.0) -> Counter[str]:
    """The counts once they have not changed for `quiet_seconds` (the server exports them late)."""
    deadline = time.monotonic() + timeout
    last = await asyncio.to_thread(read_actions, metrics_url, namespace)
    still_since = time.monotonic()
    while time.monotonic() < deadline:
        await asyncio.sleep(0.5)
        now = await asyncio.to_thread(read_actions, metrics_url, namespace)
        if now != last:
            last, still_since = now, time.monotonic()
        elif time.monotonic() - still_since >= quiet_seconds:
            return now
    return last


def since(after: Counter[str], before: Counter[str]) -> Counter[str]:
    """The actions between two readings (types with none left out)."""
    return Counter({kind: after[kind] - before[kind] for kind in after if after[kind] - before[kind] > 0})
