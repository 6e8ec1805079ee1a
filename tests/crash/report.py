"""What a crash-harness run found: the kills and where they landed, and every problem, as a report."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from tests.crash.constants import DEFAULT_PACE, PHASE_ORDER

# --------------------------------------------------------------------------------------------------
# the report


@dataclass
class KillRecord:
    number: int
    target: str  # the phase the kill aimed at
    target_seen: bool  # whether that phase was observed before the kill (else: killed at the deadline)
    phases: list[str]  # where it landed (may be several: one prompt in a model call, another waiting)
    at_s: float  # seconds since the crash phase began
    pid: int | None  # the killed worker (worker target)
    in_flight: list[str]  # calls started but not ended when the kill landed
    waiting: int  # prompts waiting for approval
    running: int  # prompts running with no call in flight (workflow task, scheduling, retry wait)
    restart_s: float  # kill -> replacement ready (worker started / server healthy)
    workers_left: int  # ready workers still up right after the kill (0: every prompt stalls until a restart)


@dataclass
class HarnessReport:
    seed: int
    target: str
    prompts: int
    kills_planned: int
    spawn: str
    rescue: bool
    workdir: str
    pool: int = 1
    pace: float = DEFAULT_PACE
    kills: list[KillRecord] = field(default_factory=list)
    completed: int = 0
    duplicates: list[str] = field(default_factory=list)
    losses: list[str] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)
    exhausted: list[str] = field(default_factory=list)  # calls that ran out of retry attempts (see check)
    usage_problems: list[str] = field(default_factory=list)
    ledger_problems: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)  # crash prompts not finished when the settle time ran out
    charges_approved: int = 0
    steers: int = 0  # crash prompts steered while waiting whose output holds the steer message exactly once
    charges_rejected: int = 0
    charge_attempts: int = 0  # executions of approved charges (retries after kills included)
    lookups_rerun: int = 0  # lookup executions beyond one per call (at-least-once, expected)
    model_calls_rerun: int = 0  # model executions beyond one per round (their usage must not count)
    model_rescues: list[dict[str, Any]] = field(default_factory=list)
    stalls: dict[str, int] = field(default_factory=dict)  # timeouts found in the crash prompts' histories
    worker_starts_s: list[float] = field(default_factory=list)
    prompt_seconds: list[float] = field(default_factory=list)  # start -> completed, crash phase
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def kills_done(self) -> int:
        return len(self.kills)

    @property
    def ok(self) -> bool:
        return not (self.duplicates or self.losses or self.mismatches or self.exhausted or self.usage_problems
                    or self.ledger_problems or self.problems) and self.completed == self.prompts

    @property
    def lost_outputs(self) -> int:
        """Output entries missing against the crash-free run, and approved charges that never took effect."""
        return len(self.losses) + sum("(lost;" in problem for problem in self.ledger_problems)

    @property
    def duplicated_effects(self) -> int:
        """Output entries that appear too often, charges applied twice, rejected charges that ran."""
        return len(self.duplicates) + sum("(duplicated;" in problem or "rejected charge ran" in problem
                                          for problem in self.ledger_problems)

    @property
    def stuck_prompts(self) -> int:
        """Crash prompts still unfinished at the end, plus workflow tasks that failed (a retry loop is stuck)."""
        return len(self.stuck) + self.stalls.get("workflow task failed", 0)

    def figures(self) -> str:
        return (f"lost outputs {self.lost_outputs}, duplicated side effects {self.duplicated_effects}, "
                f"stuck prompts {self.stuck_prompts} ({self.prompts} prompts, {self.kills_done} kills)")

    def phase_counts(self) -> dict[str, int]:
        counts = Counter(phase for kill in self.kills for phase in kill.phases)
        return {phase: counts.get(phase, 0) for phase in PHASE_ORDER}

    def replay_command(self) -> str:
        extra = (" --exec" if self.spawn == "exec" else "") + ("" if self.rescue else " --no-rescue")
        extra += f" --pool {self.pool}" if self.target == "worker" else ""
        extra += f" --pace {self.pace:g}" if self.pace != DEFAULT_PACE else ""
        return (f"python -m tests.crash.harness --seed {self.seed} --prompts {self.prompts} "
                f"--kills {self.kills_planned} --target {self.target}{extra}")

    def summary(self) -> str:
        verdict = "OK" if self.ok else "FAILED"
        phases = ", ".join(f"{k} {v}" for k, v in self.phase_counts().items())
        targets = Counter(f"{k.target}{'' if k.target_seen else '(missed)'}" for k in self.kills)
        lines = [
            f"crash harness [{verdict}] target={self.target} seed={self.seed} prompts={self.prompts} "
            f"kills={self.kills_done}/{self.kills_planned} workers={self.pool} spawn={self.spawn} rescue={self.rescue}",
            f"  {self.figures()}",
            f"  completed {self.completed}/{self.prompts}; duplicates {len(self.duplicates)}, losses "
            f"{len(self.losses)}, other output mismatches {len(self.mismatches)}, retries exhausted "
            f"{len(self.exhausted)}, usage problems "
            f"{len(self.usage_problems)}, ledger problems {len(self.ledger_problems)}, other {len(self.problems)}; "
            f"steered {self.steers}",
            f"  kills landed (a kill may count in several): {phases}",
            f"  kill targets: {dict(sorted(targets.items()))}",
            f"  charges approved {self.charges_approved} (executions incl. retries {self.charge_attempts}, "
            f"effects exactly once each), rejected {self.charges_rejected} (never run); lookups re-run "
            f"{self.lookups_rerun}; model calls re-run {self.model_calls_rerun} (usage counted once)",
            f"  model calls stranded (attempt started on a killed worker, or lost in a server restart; each "
            f"waits out the 5 min start-to-close timeout unless rescued): {len(self.model_rescues)}, rescued "
            f"{sum(bool(r['rescued']) for r in self.model_rescues)}",
            f"  timeouts in the crash prompts' histories: {self.stalls}",
        ]
        if self.worker_starts_s:
            starts = self.worker_starts_s
            lines.append(f"  worker starts: {len(starts)}, ready in {min(starts):.2f}-{max(starts):.2f} s "
                         f"(mean {sum(starts) / len(starts):.2f})")
        if self.prompt_seconds:
            secs = sorted(self.prompt_seconds)
            lines.append(f"  crash-phase prompt durations: median {secs[len(secs) // 2]:.1f} s, "
                         f"max {secs[-1]:.1f} s")
        lines.append("  timings: " + ", ".join(f"{k} {v:.1f} s" for k, v in self.timings.items()))
        for kill in self.kills:
            lines.append(f"    kill {kill.number:>3} @{kill.at_s:6.2f}s aim={kill.target:<8} "
                         f"landed={'+'.join(kill.phases):<24} restart {kill.restart_s:.2f} s "
                         f"left={kill.workers_left} "
                         f"in-flight={kill.in_flight}")
        for title, items in [("DUPLICATES", self.duplicates), ("LOSSES", self.losses),
                             ("MISMATCHES", self.mismatches), ("EXHAUSTED", self.exhausted),
                             ("USAGE", self.usage_problems),
                             ("LEDGER", self.ledger_problems), ("PROBLEMS", self.problems)]:
            lines.extend(f"  {title}: {item}" for item in items)
        if not self.ok:
            lines.append(f"  replay: {self.replay_command()}  (workdir {self.workdir})")
        return "\n".join(lines)

    def to_json(self) -> str:
        data = asdict(self)
        data["ok"] = self.ok
        data["phase_counts"] = self.phase_counts()
        data["figures"] = {"lost_outputs": self.lost_outputs, "duplicated_side_effects": self.duplicated_effects,
                           "stuck_prompts": self.stuck_prompts}
        return json.dumps(data, indent=2, default=str)
