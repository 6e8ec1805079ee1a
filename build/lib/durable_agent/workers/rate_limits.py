"""A provider's request limit -> the task-queue rate Temporal enforces, so the fleet never exceeds the limit.

Temporal's matching service limits a task queue with a token bucket per partition: rate `r / partitions`,
burst `max(ceil(r / partitions), matching.minTaskThrottlingBurstSize)` (the minimum is 1), refilled
continuously. A bucket that filled while the queue was idle hands out its burst at once and then its rate, so
one second can see `ceil(r) + r` calls: twice the rate (and, measured on Server 1.32, one call more right
after the queue is loaded). The burst cannot be set lower than one second's
worth, so the queue's rate must be about half the limit, on one partition (`matching.numTaskqueue*Partitions`
= 1 for model queues; with more partitions each one keeps a burst of its own).

The server spaces the calls when it hands them out; a worker that starts them late (a busy event loop, a slow
poll reply) would bunch them again at the provider. `PacedCalls` starts each call at the moment the server
handed it out (its `started_time`) plus a shift that is the same for consecutive calls, so the calls of one
worker process reach the provider spaced as the server spaced them. A call later than the shift raises it
(the next calls keep their gap to it); the shift comes down again by `RECOVERY` of the time between calls,
which stretches a second of calls to at most `1 + RECOVERY` seconds of the server's: within
`DISPATCH_SPREAD`. (Processes are paced separately: one falling behind the others can still bunch calls.)
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

from temporalio import activity
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

# The least time between the server handing a call out and the worker starting it: room for the poll reply.
PACING_DELAY = 0.2
# How fast a raised shift comes down: seconds per second between the calls' hand-outs.
RECOVERY = 0.1
# The longest a call waits for its start: well inside the model activity's heartbeat timeout (30 s).
MAX_WAIT = 10.0

# Calls handed out by the server reach the provider up to this many seconds later than one another (the poll
# reply, the worker starting the activity, the SDK building the request); the bound leaves room for it.
DISPATCH_SPREAD = 0.2


def queue_rate(limit: float) -> float:
    """The highest `max_task_queue_activities_per_second` under which no window of one second (stretched by
    `DISPATCH_SPREAD`) sees more than `limit` calls, on a one-partition queue.

    In a window of `w` seconds a bucket of burst `b` (>= rate `r`) hands out at most `b + ceil(r * w) - 1`
    calls, and a freshly loaded queue one more (measured on Server 1.32: 1 + b calls at once, then the rate);
    each whole burst `b` allows `r <= b` and `ceil(r * w) <= limit - b`. (So a limit below 2 calls per second
    cannot be held in the first second.)
    """
    if limit <= 0:
        raise ValueError(f"a rate limit must be greater than 0, not {limit}")
    calls = max(math.floor(limit), 2)
    window = 1 + DISPATCH_SPREAD
    best = max(min(burst, (calls - burst) / window) for burst in range(1, calls))
    return min(best, limit)


class Pacer:
    """When to start each call of one queue in this process: its hand-out time plus a shift common to
    consecutive calls (see the module's docstring). Times are seconds since the epoch."""

    def __init__(self) -> None:
        self.shift = PACING_DELAY
        self.last_handed_out: float | None = None

    def start_at(self, handed_out: float, now: float) -> float:
        if self.last_handed_out is not None and handed_out > self.last_handed_out:
            self.shift = max(PACING_DELAY, self.shift - RECOVERY * (handed_out - self.last_handed_out))
        self.shift = max(self.shift, now - handed_out)  # late: it starts now, and the next calls keep the gap
        self.last_handed_out = max(handed_out, self.last_handed_out or handed_out)
        return handed_out + self.shift

    def started(self, handed_out: float, now: float) -> None:
        """The call started at `now` (a wake-up can be late too)."""
        self.shift = max(self.shift, now - handed_out)


# One pacer per queue for the whole process: every worker of the process on a queue shares it.
_PACERS: dict[str, Pacer] = {}


class PacedCalls(Interceptor):
    """Start each activity when `Pacer` says (the same process-wide pacer for every worker on a queue)."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _Paced(next)


class _Paced(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        info = activity.info()
        pacer = _PACERS.setdefault(info.task_queue, Pacer())
        handed_out = info.started_time.timestamp()
        wait = min(pacer.start_at(handed_out, time.time()) - time.time(), MAX_WAIT)
        if wait > 0:
            await asyncio.sleep(wait)
            pacer.started(handed_out, time.time())
        return await super().execute_activity(input)
