"""The report: rows of figures with ratios and targets, rendered as a table."""

from __future__ import annotations

import hashlib
import statistics
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.config import BASELINE, PRODUCT, PRODUCT_SANDBOXED, PRODUCT_UNSANDBOXED, REPO, SECTIONS, SMALL


@dataclass
class Row:
    metric: str
    product: str
    baseline: str
    ratio: str = ""
    target: str = ""
    verdict: str = ""


def ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f} ms"


def mb(v: float | None) -> str:
    return "-" if v is None else f"{v / 1e6:.2f} MB" if v >= 1e5 else f"{v / 1e3:.1f} KB"


def mib(v: float | None) -> str:
    return "-" if v is None else f"{v / 2**20:.0f} MiB"


def ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def fx(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def median(values: list[float]) -> float:
    return statistics.median(values)


def verdict(ok: bool | None) -> str:
    return "-" if ok is None else "PASS" if ok else "FAIL"


def build_rows(results: dict[str, Any]) -> tuple[list[Row], dict[str, Any]]:
    rows: list[Row] = []
    targets: dict[str, Any] = {}

    def target(key: str, value: float | bool | None, text: str, ok: bool | None) -> str:
        targets[key] = {"value": value, "target": text, "pass": ok}
        return verdict(ok)

    # issue 28's targets; with the tool a regular activity every call (`--tool regular`) the round targets are
    # its own (per-round <= 0.8x, throughput >= 1.2x)
    regular = results.get("tool") == "regular"
    round_target, throughput_target = (0.8, 1.2) if regular else (0.6, 1.3)
    foot = results.get("footprint")
    if foot:
        _footprint_rows(rows, target, foot)
    lat = results.get("latency")
    if lat:
        for n in lat[PRODUCT]["median_ms"]:
            p, b = lat[PRODUCT]["median_ms"][n], lat[BASELINE]["median_ms"][n]
            rows.append(Row(f"latency, {n} tool round{'s' if n != 1 else ''} (median of {lat['repeats']})",
                            ms(p), ms(b), fx(ratio(p, b))))
        p, b = lat[PRODUCT]["per_round_ms"], lat[BASELINE]["per_round_ms"]
        r = ratio(p, b)
        rows.append(Row("per-round overhead (slope of medians)", ms(p), ms(b), fx(r), f"<= {round_target}x",
                        target("per_round_overhead", r, f"<= {round_target}x baseline",
                               None if r is None else r <= round_target)))
    thr = results.get("throughput")
    if thr:
        p, b = thr[PRODUCT]["prompts_per_s"], thr[BASELINE]["prompts_per_s"]
        r = ratio(p, b)
        rows.append(Row(f"throughput, {thr['prompts']} concurrent {thr['rounds']}-round prompts "
                        f"(median of {thr['repeats']})", f"{p:.1f}/s", f"{b:.1f}/s", fx(r), f">= {throughput_target}x",
                        target("throughput", r, f">= {throughput_target}x baseline",
                               None if r is None else r >= throughput_target)))
        # runs from before the default changed: the project's side had the sandbox off, the extra side on
        other, other_label = ((thr[PRODUCT_UNSANDBOXED], "off") if PRODUCT_UNSANDBOXED in thr
                              else (thr.get(PRODUCT_SANDBOXED), "on"))
        if other:
            p = other["prompts_per_s"]
            rows.append(Row(f"  the same with the sandbox {other_label}", f"{p:.1f}/s", f"{b:.1f}/s",
                            fx(ratio(p, b))))
        if "worker_cpu_ms_per_prompt" in thr[PRODUCT]:
            b = thr[BASELINE]["worker_cpu_ms_per_prompt"]
            p = thr[PRODUCT]["worker_cpu_ms_per_prompt"]
            r = ratio(p, b)
            if other_label == "off":
                rows.append(Row("worker CPU per prompt, sandbox on (project default)", ms(p), ms(b), fx(r), "<= 0.9x",
                                target("worker_cpu_sandboxed", r, "<= 0.9x baseline", None if r is None else r <= 0.9)))
            if other:
                p = other["worker_cpu_ms_per_prompt"]
                rows.append(Row(f"worker CPU per prompt, sandbox {other_label}", ms(p), ms(b), fx(ratio(p, b))))
            p, b = thr[PRODUCT]["server_cpu_ms_per_prompt"], thr[BASELINE]["server_cpu_ms_per_prompt"]
            rows.append(Row("server CPU per prompt (during the bursts)", ms(p), ms(b), fx(ratio(p, b))))
            if "client_cpu_ms_per_prompt" in thr[PRODUCT]:
                p, b = thr[PRODUCT]["client_cpu_ms_per_prompt"], thr[BASELINE]["client_cpu_ms_per_prompt"]
                rows.append(Row("client CPU per prompt (the bench's own process)", ms(p), ms(b), fx(ratio(p, b))))
    hist = results.get("history")
    if hist:
        keys = list(hist[PRODUCT])
        for key in keys:
            p, b = hist[PRODUCT][key], hist[BASELINE][key]
            n, size = key.split("x")
            label = f"history, {n} rounds" + (f" x {int(size) // 1024} KB outputs" if int(size) >= 1024 else "")
            rows.append(Row(label + ": events", str(p["events"]), str(b["events"]),
                            fx(ratio(p["events"], b["events"]))))
            r = ratio(p["bytes"], b["bytes"])
            big = int(size) >= 1024
            limit = 0.06 if big and n == "50" else 1.0 if not big and n == "20" else None
            key_name = "history_bytes_10kb_50" if big else "history_bytes_tiny_20"
            rows.append(Row(label + ": bytes", mb(p["bytes"]), mb(b["bytes"]), fx(r),
                            f"<= {limit:g}x" if limit else "",
                            target(key_name, r, f"<= {limit:g}x baseline", None if r is None else r <= limit)
                            if limit else ""))
            if big and "per_round_ms" in p:
                rows.append(Row(label + ": latency per round", ms(p["per_round_ms"]), ms(b["per_round_ms"]),
                                fx(ratio(p["per_round_ms"], b["per_round_ms"]))))
                rows.append(Row(label + ": worker CPU", ms(p["worker_cpu_ms"]), ms(b["worker_cpu_ms"]),
                                fx(ratio(p["worker_cpu_ms"], b["worker_cpu_ms"]))))
            ext_p, ext_b = p.get("external_payload_bytes", 0), b.get("external_payload_bytes", 0)
            if ext_p or ext_b:  # payloads the data converter keeps outside history: count them too
                rows.append(Row("  + payloads stored outside history", mb(ext_p), mb(ext_b)))
                rows.append(Row("  = history + outside", mb(p["bytes"] + ext_p), mb(b["bytes"] + ext_b),
                                fx(ratio(p["bytes"] + ext_p, b["bytes"] + ext_b))))
        small = [k for k in keys if k.endswith(f"x{SMALL}")]
        k100, k20 = next((k for k in small if k.startswith("100x")), None), next(
            (k for k in small if k.startswith("20x")), None)
        if k100 and k20:
            p = hist[PRODUCT][k100]["bytes"] / hist[PRODUCT][k20]["bytes"]
            b = hist[BASELINE][k100]["bytes"] / hist[BASELINE][k20]["bytes"]
            rows.append(Row("history growth: bytes(100) / bytes(20)", f"{p:.3f}", f"{b:.3f}", "", "<= 5.5",
                            target("history_growth", p, "bytes(100)/bytes(20) <= 5.5", p <= 5.5)))
    app = results.get("approval")
    if app:
        p, b = app[PRODUCT]["approve_to_result_ms"], app[BASELINE]["approve_to_result_ms"]
        rows.append(Row(f"approve -> result in query (median of {app['repeats']})", ms(p), ms(b), fx(ratio(p, b))))
        base_round = app["baseline_round_ms"]
        r = ratio(p, base_round)
        rows.append(Row("approve signal -> result in query / one baseline round", ms(p), f"round {ms(base_round)}",
                        fx(r), "<= 1.0x", target("approve_signal_to_result", r, "<= 1.0x one baseline round",
                                                 None if r is None else r <= 1.0)))
        u = app[PRODUCT].get("approve_update_to_result_ms")
        if u is not None:  # the approve_call update: its reply is the call's result (the baseline has no update)
            r = ratio(u, base_round)
            rows.append(Row(f"approve update -> result returned / one baseline round (median of {app['repeats']})",
                            ms(u), f"round {ms(base_round)}", fx(r), "<= 1.0x",
                            target("approve_to_result", r, "<= 1.0x one baseline round",
                                   None if r is None else r <= 1.0)))
    wait = results.get("waiting")
    if wait:
        _waiting_rows(rows, target, wait)
    long = results.get("long")
    if long:
        p, b = long[PRODUCT], long[BASELINE]

        def outcome(s: dict[str, Any]) -> str:
            if s["completed"]:
                return f"completed in {s['seconds']:.1f} s"
            what = "capped" if s["capped"] else s["final_status"].lower()
            return f"{what} at round {s['tool_rounds_done']} ({s['seconds']:.1f} s)"

        rows.append(Row(f"{long['rounds']}-round prompt, {long['size'] // 1024} KB outputs", outcome(p), outcome(b),
                        "", "completes", target("long_prompt", p["completed"], "completes", p["completed"])))
        rows.append(Row("  its history (events / bytes)", f"{p['events']} / {mb(p['bytes'])}",
                        f"{b['events']} / {mb(b['bytes'])}"))
        ext_p, ext_b = p.get("external_payload_bytes", 0), b.get("external_payload_bytes", 0)
        if ext_p or ext_b:
            rows.append(Row("  + payloads stored outside history", mb(ext_p), mb(ext_b)))
    conversation = results.get("conversation")
    if conversation:
        _conversation_rows(rows, target, conversation)
    for section in SECTIONS:
        data = results.get(section)
        if not data or section == "conversation":
            continue
        if section in ("waiting", "footprint"):
            peaks = {PRODUCT: data[PRODUCT]["peak"], BASELINE: data[BASELINE]["peak"]}
        elif section == "long":
            peaks = {PRODUCT: data[PRODUCT]["memory"]["peak"], BASELINE: data[BASELINE]["memory"]["peak"]}
        else:
            peaks = {PRODUCT: data["memory"][PRODUCT]["peak"], BASELINE: data["memory"][BASELINE]["peak"]}
        carried = "" if data.get("fresh_workers", True) else " (workers carried over)"
        rows.append(Row(f"worker peak RSS (VmHWM), {section}{carried}", mib(peaks[PRODUCT]), mib(peaks[BASELINE]),
                        fx(ratio(peaks[PRODUCT], peaks[BASELINE]))))
    return rows, targets


def code_version() -> dict[str, Any]:
    """The project's git commit and uncommitted changes to its code (worker processes import it at start)."""
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=10,
                                  check=False).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""
    changed = git("status", "--porcelain", "--", "agent", "workflows", "activities", "workers", "plugins")
    digest = git("diff", "HEAD", "--", "agent", "workflows", "activities", "workers", "plugins")
    return {"commit": git("rev-parse", "--short", "HEAD"), "uncommitted": changed.splitlines(),
            "diff_sha1": hashlib.sha1(digest.encode()).hexdigest()[:12] if digest else ""}


def render(rows: list[Row]) -> str:
    header = Row("metric", PRODUCT, BASELINE, "ratio", "target", "result")
    table = [header, *rows]
    widths = [max(len(getattr(r, f)) for r in table) for f in ("metric", "product", "baseline", "ratio", "target",
                                                                 "verdict")]
    lines = []
    for i, r in enumerate(table):
        cells = [r.metric, r.product, r.baseline, r.ratio, r.target, r.verdict]
        lines.append("  ".join(c.ljust(w) if j == 0 else c.rjust(w) for j, (c, w) in enumerate(zip(cells, widths,
                                                                                                    strict=True))))
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _conversation_rows(rows: list[Row], target: Callable[[str, float | bool | None, str, bool | None], str],
                       results: dict[str, Any]) -> None:
    """This project's conversation against the baseline's (absent from results of runs before it had one)."""
    conv, base = (results[PRODUCT], results.get(BASELINE)) if PRODUCT in results else (results, None)
    early, late = (str(m) if str(m) in conv["turn_ms"] else m for m in conv["marks"])

    def pair(values: dict[Any, float], unit: Callable[[float], str]) -> str:
        return f"{unit(values[early])} vs {unit(values[late])}"

    def baseline(key: str, unit: Callable[[float], str]) -> str:
        values = base.get(key) if base else None
        return pair(values, unit) if values and early in values and late in values else "-"

    stalled = [f"{name} stalled at turn {side['stalled_at']}" for name, side in ((PRODUCT, conv), (BASELINE, base))
               if side and side.get("stalled_at")]
    done = f" ({'; '.join(stalled)}: no result within 180 s)" if stalled else ""
    rows.append(Row(f"conversation of {conv['turns']} turns{done}, {conv['runs']} runs: history + payload bytes",
                    mb(conv["total_bytes"]), mb(base["total_bytes"]) if base else "-",
                    fx(ratio(conv["total_bytes"], base["total_bytes"])) if base else "", "linear",
                    verdict(None) if conv.get("stalled_at") else ""))
    rows.append(Row("  prompts' histories / conversation's / payload store / history links",
                    f"{mb(conv['prompt_history_bytes'])} / {mb(conv['conversation_history_bytes'])} / "
                    f"{mb(conv['payload_store_bytes'])} / {mb(conv.get('history_link_bytes', 0))}", "-"))
    rows.append(Row(f"  turn latency at turn {early} vs turn {late}, one conversation (median of 10)",
                    pair(conv["turn_ms"], ms), baseline("turn_ms", ms), fx(ratio(conv["turn_ms"][late],
                                                                                  conv["turn_ms"][early]))))
    both = conv.get("interleaved_ms")
    if both:
        r = ratio(both[late], both[early])
        base_both = base.get("interleaved_ms") if base else None
        rows.append(Row(f"  the same, in the same seconds: turns {early - 4}-{early + 5} of a fresh conversation "
                        f"vs the last 10", pair(both, ms), baseline("interleaved_ms", ms)))
        rows.append(Row("    growth, late / early (interleaved)", fx(r),
                        fx(ratio(base_both[late], base_both[early])) if base_both else "-", "", "<= 1.2x",
                        target("conversation_flat", r, "<= 1.2x (turn 500 vs turn 10, interleaved)",
                               None if r is None else r <= 1.2)))
        if base_both:
            rows.append(Row(f"  turn latency at turn {late} (interleaved)", ms(both[late]), ms(base_both[late]),
                            fx(ratio(both[late], base_both[late]))))
    sizes = conv["child_history_bytes"]
    if early in sizes and late in sizes:
        base_sizes = base.get("child_history_bytes") if base else None
        rows.append(Row(f"  one turn's prompt history at turn {early} vs {late}", pair(sizes, mb),
                        baseline("child_history_bytes", mb),
                        fx(ratio(sizes[late], base_sizes[late])) if base_sizes and late in base_sizes else ""))


def _footprint_rows(rows: list[Row], target: Callable[[str, float | bool | None, str, bool | None], str],
                    foot: dict[str, Any]) -> None:
    """Cold starts and idle worker RSS (issue 28)."""
    n = foot["repeats"]
    for name, values in foot["cli_ms"].items():
        label = f"cold start, dagent {'--help' if name == 'help' else name} (median of {n})"
        if name == "help":
            rows.append(Row(label, ms(values["median"]), "-", "", "<= 400 ms",
                            target("help", values["median"], "<= 400 ms", values["median"] <= 400)))
        else:
            rows.append(Row(label, ms(values["median"]), "-"))
        if "cpu_median" in values:
            rows.append(Row("  its CPU time (user + system, median)", ms(values["cpu_median"]), "-"))
    p, b = foot[PRODUCT], foot[BASELINE]
    first = p["first_poll_median_ms"]
    rows.append(Row(f"cold start, worker spawn -> first poll (median of {n})", ms(first),
                    ms(b["first_poll_median_ms"]), fx(ratio(first, b["first_poll_median_ms"])), "<= 1500 ms",
                    target("first_poll", first, "<= 1500 ms", first <= 1500)))
    r = ratio(p["idle_rss"], b["idle_rss"])
    rows.append(Row("worker RSS idle (warmed up)", mib(p["idle_rss"]), mib(b["idle_rss"]), fx(r), "<= 1.1x",
                    target("idle_rss", r, "<= 1.1x baseline", None if r is None else r <= 1.1)))
    off = foot.get(PRODUCT_UNSANDBOXED)
    if off:
        rows.append(Row("  sandbox off: first poll / idle RSS", f"{ms(off['first_poll_median_ms'])} / "
                        f"{mib(off['idle_rss'])}", "-", fx(ratio(off["idle_rss"], b["idle_rss"]))))


def _waiting_rows(rows: list[Row], target: Callable[[str, float | bool | None, str, bool | None], str],
                  wait: dict[str, Any]) -> None:
    """N waiting prompts: worker RSS, the approvals list, resume latency (issue 28), per project side."""
    n, b = wait["prompts"], wait[BASELINE]
    rows.append(Row(f"{n} prompts waiting: worker RSS", mib(wait[PRODUCT]["waiting_rss"]), mib(b["waiting_rss"]),
                    fx(ratio(wait[PRODUCT]["waiting_rss"], b["waiting_rss"]))))
    for name in (PRODUCT, PRODUCT_UNSANDBOXED):
        p = wait.get(name)
        if not p:
            continue
        tag = "" if name == PRODUCT else f" ({name})"
        key = "" if name == PRODUCT else "_sandbox_off"
        if name != PRODUCT:
            rows.append(Row(f"  worker RSS{tag}", mib(p["waiting_rss"]), mib(b["waiting_rss"]),
                            fx(ratio(p["waiting_rss"], b["waiting_rss"]))))
        rows.append(Row(f"  waiting RSS / idle RSS{tag}", f"{p['ratio']:.3f}", f"{b['ratio']:.3f}", "", "<= 1.2",
                        target(f"waiting_rss{key}", p["ratio"], "<= 1.2x idle", p["ratio"] <= 1.2)))
        if p.get("server_cpu_seconds") is not None and b.get("server_cpu_seconds") is not None:
            per = [side["server_cpu_seconds"] / n * 1000 for side in (p, b)]
            rows.append(Row(f"  server CPU per prompt brought to wait{tag}", ms(per[0]), ms(per[1]),
                            fx(ratio(per[0], per[1]))))
        if p.get("server_store_bytes_per_prompt") is not None and b.get("server_store_bytes_per_prompt") is not None:
            stored = [side["server_store_bytes_per_prompt"] / 1024 for side in (p, b)]
            rows.append(Row(f"  server store per waiting prompt (history + visibility){tag}", f"{stored[0]:.1f} KiB",
                            f"{stored[1]:.1f} KiB", fx(ratio(stored[0], stored[1]))))
        lists = p.get("lists", {})
        base_list = b.get("lists", {}).get("queries")
        for way, label in (("client", "AgentClient.pending"), ("cli", "dagent pending --json"),
                           ("api", "GET /approvals")):
            if way in lists:
                value = median(lists[way]["ms"])
                rows.append(Row(f"  approvals list, {label}{tag} ({lists[way]['rows'][-1]} rows)", ms(value),
                                ms(median(base_list["ms"])) if base_list else "-",
                                fx(ratio(value, median(base_list["ms"]))) if base_list else "", "<= 2 s",
                                target(f"list_{way}{key}", value, "<= 2000 ms", value <= 2000)))
        if "queries" in lists:
            value = median(lists["queries"]["ms"])
            rows.append(Row(f"  the same by one query per prompt (before memos){tag}", ms(value),
                            ms(median(base_list["ms"])) if base_list else "-",
                            fx(ratio(value, median(base_list["ms"]))) if base_list else ""))
        if "resume_p99_ms" in p:
            rows.append(Row(f"  approve -> result p50 / p99 ({len(p['resume_ms'])} of the {n}){tag}",
                            f"{ms(p['resume_median_ms'])} / {ms(p['resume_p99_ms'])}",
                            f"{ms(b['resume_median_ms'])} / {ms(b['resume_p99_ms'])}",
                            fx(ratio(p["resume_p99_ms"], b["resume_p99_ms"]))))
            rows.append(Row(f"  fresh 1-round prompt p50 / p99{tag}", f"{ms(p['fresh_median_ms'])} / "
                            f"{ms(p['fresh_p99_ms'])}", f"{ms(b['fresh_median_ms'])} / {ms(b['fresh_p99_ms'])}",
                            fx(ratio(p["fresh_median_ms"], b["fresh_median_ms"]))))
            r = ratio(p["resume_p99_ms"], p["fresh_median_ms"])
            rows.append(Row(f"  resume p99 / fresh 1-round p50 (own worker){tag}", fx(r),
                            fx(ratio(b["resume_p99_ms"], b["fresh_median_ms"])), "", "<= 2x",
                            target(f"resume_p99{key}", r, "<= 2x a fresh 1-round prompt",
                                   None if r is None else r <= 2)))
        elif "resume_median_ms" in p:  # runs before p99 was measured
            rows.append(Row(f"  approve -> result (median){tag}", ms(p["resume_median_ms"]),
                            ms(b["resume_median_ms"]), fx(ratio(p["resume_median_ms"], b["resume_median_ms"]))))
