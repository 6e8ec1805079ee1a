"""Benchmark Durable Agent against a minimal hand-rolled Temporal agent loop, in one run.

    .venv/bin/python -m bench.run                      # full run
    .venv/bin/python -m bench.run --quick              # smoke run (~1-1.5 min)
    .venv/bin/python -m bench.run --sections latency,history

Starts its own headless dev server (``DevServer``: the flags of ``dagent server``, i.e. search attributes,
dynamic config and a SQLite ``--db-filename``; the file lives in /dev/shm unless ``--db-dir`` says
otherwise), runs every worker in its own subprocess (the project's: ``python -m cli worker`` with
``bench.plugin``; the baseline's: ``python -m bench.baseline``) so its RSS can be read from
``/proc/<pid>/status``, measures both sides with the same scripted model logic (``bench.scenario``), prints
a table and writes the raw numbers to ``bench/results/latest.json``.

Sections (``--sections``):

* ``footprint`` - cold starts, median of 10: ``dagent --help``, ``dagent ls``, and each side's worker from
  spawn to its first poll (seen by the server: DescribeTaskQueue lists its poller); then each side's worker
  RSS warmed up and idle, and its peak (VmHWM) so far (``bench/footprint.py``).
* ``latency`` - client ``start_workflow`` -> result for 1, 5, 20, 100 tool rounds (median of 5, sides
  interleaved); per-round overhead = least-squares slope of the medians over the round counts.
* ``throughput`` - 100 prompts of 3 tool rounds started at once on one worker; prompts/s = 100 / (first
  start -> last result); median of 5 bursts per side, rotated. Also the worker's (and the server's) CPU per
  prompt over each burst (``/proc/<pid>/stat``). The project runs twice here: with its defaults (sandbox
  on, like the baseline's runner) and with ``DAGENT_WORKFLOW_SANDBOX=off`` (``durable-agent-sandbox-off``).
* ``history`` - events and bytes of one prompt of 5, 20, 100 rounds (16-byte tool outputs) and of 20 and 50
  rounds with 10 KB outputs (with their latency per round and worker CPU). Bytes = sum of
  ``HistoryEvent.ByteSize()`` over ``fetch_history()``; payloads the project's data converter keeps outside
  history (external storage) are reported next to it.
* ``approval`` - ``approve`` signal sent -> first ``get_prompt`` (baseline: ``get_state``) query that shows
  the tool's result, median of 20; and, this project only (the baseline has no update), the ``approve_call``
  update sent -> its reply, the call's result; each compared with one baseline round (the latency slope).
* ``waiting`` - a fresh worker's RSS (VmRSS) when idle (after a warm-up) and when N prompts (``--waiting``,
  default 1,000) wait for approval (started in bursts of 50, each once the previous burst waits; counted
  through the ``PromptState`` search attribute), and the server's CPU and store growth (SQLite pages in use:
  history and visibility) per prompt brought to wait; the approvals list with them waiting (median of 3:
  ``AgentClient.pending``, ``dagent pending --json``, ``GET /approvals``; and, up to N = 2,000, the list by
  one query per prompt, as before memos and as the baseline has to: ``bench/approvals_list.py``); then 40 of
  them, from the oldest to the newest, approved one at a time: approve -> result shown by a query (resume
  latency, p50/p99), each followed by a fresh 1-round prompt (start -> result) for comparison; the rest are
  terminated. One side at a time: the project with the sandbox on, off, then the baseline.
* ``long`` - one prompt of 1,000 rounds with 10 KB outputs, terminated if still running after 200 s:
  completed or not, time, rounds done, history size (the baseline hits the 50 MB history limit).
* ``conversation`` - a conversation of 500 one-round turns on each side (the baseline's: a new workflow per
  turn whose input carries the whole transcript so far); its total history + payload-store bytes, and per-turn
  latency at turn 10 vs turn 500, also measured in the same seconds (``bench/conversation.py``).

``footprint``, ``latency``, ``throughput``, ``waiting`` and ``long`` start fresh worker subprocesses (on new
task queues); ``history`` and ``approval`` carry on with the latency section's workers (quick mode: ``throughput`` too).
Each section reports its workers' peak RSS (VmHWM) at its end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import temporalio
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from bench.config import BASELINE, PRODUCT, RESULTS, SECTIONS, Config, log
from bench.report import build_rows, code_version, render
from bench.sections import Bench
from bench.sides import BaselineSide, ProductSide, product_settings
from durable_agent.cli.devserver import DevServer
from durable_agent.workers.worker import connect


async def run_bench(cfg: Config, sections: Sequence[str], workdir: Path, db_file: Path | None,
                    options: dict[str, Any]) -> dict[str, Any]:
    server = DevServer(db_file=db_file, log_file=workdir / "temporal.log")
    t_start = time.perf_counter()
    await server.start_async()
    log(f"dev server on {server.address} (headless, db {server.db_file or 'in memory'})")
    bench: Bench | None = None
    try:
        product_client = await connect(product_settings(server.address, workdir))
        baseline_client = await Client.connect(server.address, data_converter=pydantic_data_converter)
        bench = Bench(cfg, ProductSide(product_client, server.address, workdir, options),
                      BaselineSide(baseline_client, server.address, workdir, options), server.pid or 0, db_file,
                      product_unsandboxed=ProductSide(product_client, server.address, workdir, options, sandbox="off")
                      if options["sandbox_off"] else None)
        bench.results["tool"] = options.get("tool") or "default"
        bench.results["model_calls"] = options.get("model_calls") or "activity"
        timings: dict[str, float] = {}
        for section in sections:
            log(f"section {section}")
            t0 = time.perf_counter()
            if section == "approval":
                latency = bench.results.get("latency")
                bench.results[section] = await bench.approval(latency[BASELINE]["per_round_ms"] if latency else None)
            else:
                bench.results[section] = await getattr(bench, section)()
            timings[section] = time.perf_counter() - t0
            log(f"section {section} done in {timings[section]:.1f} s")
        bench.results["section_seconds"] = timings
        bench.results["total_seconds"] = time.perf_counter() - t_start
        return bench.results
    finally:
        if bench is not None:
            for side in bench.all_sides:
                side.stop_worker()
        await server.stop_async()


def _int_keys(results: dict[str, Any]) -> dict[str, Any]:
    """JSON turned the latency round counts into strings: turn them back."""
    latency = results.get("latency")
    if latency:
        for side in (PRODUCT, BASELINE):
            latency[side]["median_ms"] = {int(k): v for k, v in latency[side]["median_ms"].items()}
    return results


_TOOL_NOTE = {"default": "`local` unset (fast tools: regular activities until seen fast, then local)",
              "local": "local=True (a local activity)", "regular": "local=False (a regular activity every call)"}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke run (~1 min): fewer repeats and prompts")
    parser.add_argument("--sections", default=",".join(SECTIONS),
                        help=f"comma-separated subset of {','.join(SECTIONS)} (default: all)")
    parser.add_argument("--repeats", type=int, help="latency repeats per round count")
    parser.add_argument("--bursts", type=int,
                        help="throughput bursts per side (default 5; each side's figure is the median)")
    parser.add_argument("--waiting", type=int, help="prompts waiting for approval in the memory test")
    parser.add_argument("--no-sandbox-off", action="store_true",
                        help="skip the project's sandbox-off side (footprint, throughput, waiting): e.g. for a "
                             "long --waiting 10000 run")
    parser.add_argument("--waiting-batch", type=int, help="prompts per burst in the waiting test (default 50)")
    parser.add_argument("--long-cap", type=float, help="seconds before the 1,000-round prompt is terminated")
    parser.add_argument("--db-dir", type=Path, default=Path("/dev/shm") if Path("/dev/shm").is_dir() else None,
                        help="directory of the dev server's SQLite file (default: /dev/shm, i.e. in RAM, so the "
                             "disk's fsync latency, shared with whatever else runs on the box, does not dominate; "
                             "give a disk directory to include it)")
    parser.add_argument("--in-memory-db", action="store_true",
                        help="dev server without --db-filename (`dagent server` always uses a SQLite file)")
    parser.add_argument("--tool", choices=["default", "local", "regular"], default="default",
                        help="the project's bench tool: `default` leaves `local` unset like a user's tool (fast "
                             "tools: local activities once seen fast), `local` declares local=True, `regular` "
                             "local=False (a regular activity every call, like the baseline's)")
    parser.add_argument("--local-tool", action="store_const", const="local", dest="tool", help="= --tool local")
    parser.add_argument("--model-calls", choices=["activity", "local"], default="activity",
                        help="how the project's prompts run model rounds (DAGENT_MODEL_CALLS): `activity` (default) "
                             "or `local` (local activities: one workflow task per tool round)")
    parser.add_argument("--out", type=Path, help="JSON results file (default: bench/results/latest.json, "
                                                  "quick mode: bench/results/latest-quick.json)")
    parser.add_argument("--report", type=Path, metavar="JSON",
                        help="only print the table of an earlier run's JSON file (runs nothing)")
    parser.add_argument("--keep-tmp", action="store_true", help="keep the temp dir (server db, worker logs)")
    args = parser.parse_args(argv)
    if args.report:
        document = json.loads(args.report.read_text())
        print(render(build_rows(_int_keys(document["results"]))[0]))
        for note in document.get("notes", []):
            print(f"Note: {note}")
        print(f"{document['mode']} run of {document['created_at']}, wall time {document['wall_seconds']:.0f} s")
        return 0

    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = sorted(set(sections) - set(SECTIONS))
    if unknown:
        parser.error(f"unknown sections {unknown}; choose from {','.join(SECTIONS)}")
    sections = [s for s in SECTIONS if s in sections]
    cfg = Config.quick() if args.quick else Config()
    args.out = args.out or RESULTS / ("latest-quick.json" if args.quick else "latest.json")
    if args.repeats:
        cfg.latency_repeats = args.repeats
    if args.bursts:
        cfg.throughput_repeats = args.bursts
    if args.waiting:
        cfg.waiting_prompts = args.waiting
    if args.waiting_batch:
        cfg.waiting_batch = args.waiting_batch
    if args.long_cap:
        cfg.long_cap_s = args.long_cap

    workdir = Path(tempfile.mkdtemp(prefix="dagent-bench-"))
    db_file: Path | None = None
    if not args.in_memory_db:
        db_dir = args.db_dir or workdir
        db_dir.mkdir(parents=True, exist_ok=True)
        db_file = db_dir / f"dagent-bench-{uuid.uuid4().hex[:8]}.db"
    store = "in memory" if db_file is None else f"SQLite file {db_file}"
    load_before = os.getloadavg()
    version_before = code_version()
    t0 = time.perf_counter()
    try:
        options = {"tool": "" if args.tool == "default" else args.tool, "sandbox_off": not args.no_sandbox_off,
                   "model_calls": args.model_calls}
        results = asyncio.run(run_bench(cfg, sections, workdir, db_file, options))
    finally:
        if db_file is not None:
            for leftover in db_file.parent.glob(db_file.name + "*"):  # the db and its -wal/-shm/-journal
                leftover.unlink(missing_ok=True)
        if args.keep_tmp:
            log(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    rows, targets = build_rows(results)
    table = render(rows)
    wall = time.perf_counter() - t0
    load_after = os.getloadavg()
    version_after = code_version()
    print(table)
    print()
    print(f"{PRODUCT} = this project (PromptWorkflow via `dagent worker`); {BASELINE} = bench/baseline.py. "
          f"ratio = {PRODUCT} / {BASELINE}.")
    print("History bytes = sum of HistoryEvent.ByteSize() over fetch_history(); payloads the project's data "
          "converter stores outside history are listed separately (server's external_payload_size_bytes).")
    print("Latency = client start_workflow -> result. Per-round overhead = least-squares slope of the latency "
          "medians over the round counts. Approve -> result = signal sent -> first get_prompt/query showing "
          "the tool result.")
    notes = [
        f"{PRODUCT} worker: the project's own defaults (workflow cache size, sandboxed workflow runner with our "
        f"package passed through, data converter with external payload storage); bench tool: "
        f"{_TOOL_NOTE[args.tool]}. "
        f"{BASELINE} worker: SDK defaults (sandboxed runner, 1,000 cached workflows), pydantic converter.",
        f"Waiting test: prompts started in bursts of {cfg.waiting_batch}, each once the previous burst waits; "
        f"RSS read {cfg.settle_s:g} s after the last one waits.",
    ]
    if args.quick:
        notes.append("Quick mode: fewer repeats/prompts, smaller 'big' history case, 1,000-round prompt capped at "
                     f"{cfg.long_cap_s:g} s: a smoke run, not figures.")
    dirty = " + uncommitted changes" if version_before["uncommitted"] else ""
    notes.append(f"Project code: commit {version_before['commit'] or '?'}{dirty}.")
    if version_after != version_before:
        notes.append(f"WARNING: the project's code changed during the run (now {version_after['commit']}); "
                     "workers started after the change ran the new code.")
    for note in notes:
        print(f"Note: {note}")
    passed = sum(1 for t in targets.values() if t["pass"])
    print(f"Targets: {passed}/{len(targets)} PASS. Wall time {wall:.0f} s"
          f"{' (quick mode)' if args.quick else ''}. Dev server store: {store}. Load average (1 min) before/after: "
          f"{load_before[0]:.1f}/{load_after[0]:.1f} on {os.cpu_count()} CPUs. JSON: {args.out}")

    document = {
        "created_at": datetime.now(UTC).isoformat(),
        "mode": "quick" if args.quick else "full",
        "sections": sections,
        "config": asdict(cfg),
        "code_version": {"before": version_before, "after": version_after},
        "environment": {"python": platform.python_version(), "temporalio": temporalio.__version__,
                        "cpus": os.cpu_count(), "machine": platform.machine(),
                        "loadavg_before": load_before, "loadavg_after": load_after,
                        "dev_server_store": store},
        "wall_seconds": wall,
        "targets": targets,
        "notes": notes,
        "table": [asdict(r) for r in rows],
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
