// The approvals inbox: every waiting call the caller may see, live from GET /approvals/events, one card per
// model response (its batch), with the prompt's text and the model's message. Nothing vanishes silently:
// a decision made here is confirmed or explained, and a call decided elsewhere says who decided it (read
// from that prompt's own event stream, in order).
"use strict";

DA.start(async (me) => {
  const { api, stream, el, agoNode, forNode, argumentsList, decisionControls, resultText, PAST } = DA;
  const board = document.getElementById("calls");
  const status = document.getElementById("status");
  const announcements = document.getElementById("announcements");
  const calls = new Map(); // "prompt/call" -> call view
  const groups = new Map(); // batch key -> group view
  const followers = new Map(); // waiting prompt id -> { tracked: Map(own call id -> call view), stop }

  const callKey = (item) => `${item.prompt_id}/${item.tool_call_id}`;
  const groupKey = (item) => {
    const batch = item.context && item.context.batch.length ? item.context.batch[0] : item.requested_at;
    return `${item.prompt_id}|${batch}`;
  };
  const position = (item) => (item.context ? item.context.position : 0);
  // The prompt whose events carry this call, and the call's id there (a sub-agent's call is `<call>/<call>`).
  const waitingPrompt = (item) => (item.path && item.path.length ? item.path[item.path.length - 1] : item.prompt_id);
  const ownId = (item) => item.tool_call_id.split("/").pop();

  function announce(...parts) {
    announcements.prepend(el("li", {}, ...parts));
    while (announcements.children.length > 5) announcements.lastChild.remove();
  }

  // --- one call ------------------------------------------------------------------------------------

  function callView(item) {
    const view = { item, state: "waiting", mine: null, announced: false };
    const outcome = el("p", { class: "outcome", role: "status", hidden: true });
    view.outcome = outcome;
    let body;
    if (item.can_decide) {
      view.controls = decisionControls(item.prompt_id, item, item.input_schema, {
        onStart: (kind) => { view.state = "busy"; view.mine = { kind }; },
        onSettled: (result) => settled(view, result),
      });
      body = view.controls.node;
    } else {
      body = el("div", {}, argumentsList(item.input, item.input_schema),
        el("p", { class: "muted not-allowed", text: `You may not decide this call (approvers: ${
          (item.approvers || []).join(", ") || "the owner and approvers"}).` }));
    }
    view.body = body;
    view.node = el("section", { class: "call", "data-prompt": item.prompt_id, "data-call": item.tool_call_id,
      "data-tool": item.tool, "data-state": "waiting" },
    el("div", { class: "row" }, el("strong", { class: "tool", text: item.tool }),
      el("span", { class: "muted since" }, `asked by ${item.user_id || "?"} · waiting `, forNode(item.requested_at)),
      item.expires_at ? el("span", { class: "muted", text: ` · expires ${new Date(item.expires_at).toLocaleString()}` }) : null),
    el("p", { class: "reason", text: item.reason }),
    undeliveredNode(item.undelivered || []),
    body, outcome);
    if (linked(item)) {
      view.node.classList.add("linked");
      setTimeout(() => view.node.scrollIntoView({ block: "center" }));
    }
    return view;
  }

  // A message's link names the call it is about (#prompt=<id>&call=<id>: the prompt that waits, its own call id;
  // docs/telling-approvers.md): that card is marked and scrolled to. The link only shows it; deciding is a click.
  function linked(item) {
    const prompt = DA.hashParam("prompt");
    const call = DA.hashParam("call");
    return Boolean(prompt && call) && ((item.prompt_id === prompt && item.tool_call_id === call)
      || (waitingPrompt(item) === prompt && ownId(item) === call));
  }

  // Steps telling people of the call that could not be delivered (docs/telling-approvers.md): nobody may know.
  function undeliveredNode(notices) {
    if (!notices.length) return null;
    return el("p", { class: "undelivered" }, el("strong", { text: "Not delivered: " }),
      notices.map((n) => `${n.channel} ${n.step} (${n.error || "?"})`).join(", "));
  }

  // The files the call attached when it ran (its `file` outputs), as download links under its outcome.
  function showFiles(view) {
    view.filesAsked = true;
    const prompt = waitingPrompt(view.item);
    DA.api("GET", `/prompts/${encodeURIComponent(prompt)}`).then((record) => {
      record.prompt.output.forEach((entry, index) => {
        if (entry.type === "file" && entry.tool_call_id === ownId(view.item)) {
          view.fileLinks = [...(view.fileLinks || []), " ", DA.fileLink(prompt, index, entry)];
          view.outcome.append(...view.fileLinks.slice(-2));
        }
      });
    }).catch(() => { view.filesAsked = false; });
  }

  function setOutcome(view, state, kind, ...parts) {
    view.state = state;
    view.node.dataset.state = state;
    view.node.dataset.outcome = kind;
    view.outcome.hidden = false;
    view.outcome.className = "outcome " + kind;
    view.outcome.replaceChildren(...parts, ...(view.fileLinks || []));
    if (state === "done" || state === "decided") view.body.hidden = true;
    if (state === "done" && kind !== "lost" && !view.filesAsked) showFiles(view);
    view.node.querySelector(".since").hidden = state !== "checking";
    refresh();
  }

  // My own decision came back: confirm it, or explain why it did not apply.
  function settled(view, result) {
    const { item } = view;
    if (result.error) {
      if (result.error.status === 409) {
        const decision = result.error.problem.decision;
        const yours = result.kind === "approve" ? "approval" : "rejection";
        setOutcome(view, decision ? "done" : "decided", "lost", el("strong", { text: "Not applied: " }),
          decision ? el("span", {}, `your ${yours} came too late — already ${decision.decision} by ${decision.by || "someone"} `,
            agoNode(decision.at), decision.reason ? ` (“${decision.reason}”).` : ".")
            : `your ${yours} came too late — ${result.error.message}`);
        if (!decision) follow(view);
      } else {
        view.state = "waiting"; view.mine = null; // refused for a reason the approver can fix: try again
        refresh();
      }
      return;
    }
    view.mine = result;
    const entry = result.resolved;
    const who = `${result.kind === "approve" ? "Approved" : "Rejected"} by you`;
    const fix = result.correction ? ` with ${result.correction}` : "";
    const why = result.kind === "reject" && result.reason ? ` (“${result.reason}”)` : "";
    if (result.kind === "approve" && entry && entry.result && entry.result.type === "success") {
      setOutcome(view, "done", "approved", el("strong", { text: `✓ ${who}${fix}` }),
        ` — ${item.tool} ran: ${resultText(entry.result.output)}`);
    } else if (result.kind === "approve" && entry && entry.result && entry.result.type === "error") {
      setOutcome(view, "done", "approved", el("strong", { text: `✓ ${who}${fix}` }),
        ` — ${item.tool} failed: ${entry.result.error}`);
    } else if (result.kind === "approve") {
      setOutcome(view, "decided", "approved", el("strong", { text: `✓ ${who}${fix}` }),
        " — it runs once the other calls of this batch are decided.");
      follow(view);
    } else {
      setOutcome(view, "done", "rejected", el("strong", { text: `✗ ${who}${why}` }), " — the model is told.");
    }
  }

  // The call is no longer listed: learn from its prompt's events who decided it, and what it did.
  function seenInStream(view, entry) {
    const { item } = view;
    if (!entry || entry.type !== "tool") return;
    const decision = entry.decision;
    const ran = entry.result && entry.result.type === "success" ? ` — ${item.tool} ran: ${resultText(entry.result.output)}`
      : entry.result && entry.result.type === "error" && decision && decision.decision === "approved"
        ? ` — ${item.tool} failed: ${entry.result.error}` : "";
    const final = entry.result && entry.result.type !== "pending";
    if (view.mine && view.mine.resolved) { // my approval, waiting for the rest of its batch
      if (final) setOutcome(view, "done", "approved", view.outcome.firstChild, ran || " — done.");
      return;
    }
    if (!decision) return;
    const by = decision.by || "someone";
    const byMe = by === me.id && !view.mine;
    const correction = decision.original_input ? DA.diffText(decision.original_input, entry.input, item.input_schema) : "";
    const lost = view.state === "decided" && view.node.dataset.outcome === "lost";
    const head = el("strong", { text: `${lost ? "Already " : ""}${decision.decision} by ${byMe ? "you (elsewhere)" : by} ` });
    const parts = [head, agoNode(decision.at), correction ? ` with ${correction}` : "",
      decision.reason ? ` (“${decision.reason}”)` : "", final ? ran : notYet(item, decision)];
    if (lost) parts.unshift(el("strong", { text: "Not applied: " }));
    setOutcome(view, final ? "done" : "decided", lost ? "lost" : "elsewhere", ...parts);
    if (!view.announced && !lost) {
      view.announced = true;
      announce(el("strong", { text: by }), ` ${decision.decision} ${item.tool} (asked by ${item.user_id || "?"}) `,
        agoNode(decision.at));
    }
  }

  // A decided call with no result yet: it runs now, or (a call of a batch) once every call of it is decided.
  function notYet(item, decision) {
    const batch = (item.context && item.context.batch) || [];
    if (decision.decision !== "approved") {
      return batch.length > 1 ? " — the model hears of it once the rest of its batch is decided." : "";
    }
    return batch.length > 1 ? " — runs once every call of its batch is decided." : " — running…";
  }

  function follow(view) {
    const prompt = waitingPrompt(view.item);
    let follower = followers.get(prompt);
    if (!follower) {
      const latest = new Map(); // own call id -> its latest entry, in stream order
      follower = { tracked: new Map(), latest };
      followers.set(prompt, follower);
      follower.handle = stream(`/prompts/${encodeURIComponent(prompt)}/events`, (kind, data) => {
        if (!data.output || data.output.type !== "tool") return;
        latest.set(data.output.id, data.output);
        const tracked = follower.tracked.get(data.output.id);
        if (tracked) seenInStream(tracked, data.output);
      }, {
        onEnd: (end) => {
          for (const tracked of follower.tracked.values()) {
            if (tracked.state === "checking") {
              setOutcome(tracked, "done", "elsewhere", `No longer waiting: the prompt is ${DA.stateLabel(end.state)}.`);
            }
          }
          followers.delete(prompt);
        },
        onError: () => followers.delete(prompt),
      });
    }
    follower.tracked.set(ownId(view.item), view);
    const known = follower.latest.get(ownId(view.item));
    if (known) seenInStream(view, known);
  }

  // --- one batch -----------------------------------------------------------------------------------

  function groupView(item) {
    const context = item.context || {};
    const list = el("div", { class: "calls" });
    const reason = el("input", { type: "text", placeholder: "reason (for rejecting all)", "aria-label": "reason for rejecting all" });
    const approveAll = el("button", { type: "button", class: "approve approve-all" });
    const rejectAll = el("button", { type: "button", class: "reject reject-all" });
    const actions = el("div", { class: "row batch-actions", hidden: true }, approveAll, reason, rejectAll);
    const view = { keys: [], list, actions, approveAll, rejectAll };
    async function all(kind) {
      for (const key of [...view.keys]) {
        const call = calls.get(key);
        if (!call || call.state !== "waiting" || !call.controls) continue;
        const result = await call.controls.decide(kind, kind === "reject" ? reason.value : undefined);
        if (result && result.error && result.error.status !== 409) break; // a bad correction: stop, say why
      }
    }
    approveAll.addEventListener("click", () => all("approve"));
    rejectAll.addEventListener("click", () => all("reject"));
    const dismiss = el("button", { type: "button", class: "link dismiss", text: "Dismiss", hidden: true });
    view.dismiss = dismiss;
    view.node = el("article", { class: "card batch", "data-prompt": item.prompt_id },
      el("div", { class: "context" },
        el("p", { class: "asked" }, el("strong", { text: item.user_id || "?" }), " asked ", agoNode(item.requested_at), ":"),
        context.prompt_input ? el("blockquote", { class: "prompt-text", text: context.prompt_input })
          : el("p", { class: "muted", text: "(a prompt started by the system, with no text)" }),
        context.model_message ? el("div", { class: "model-message" }, el("span", { class: "muted", text: "The model said: " }),
          el("q", { text: context.model_message })) : null,
        el("p", { class: "muted batch-size" })),
      list, actions,
      el("p", { class: "muted links" },
        el("a", { href: item.links.temporal_ui || "#", target: "_blank", rel: "noopener", text: `workflow ${item.prompt_id}` }),
        item.conversation_id ? " · " : null,
        item.conversation_id ? el("a", { href: item.links.chat, text: "conversation" }) : null,
        " ", dismiss));
    dismiss.addEventListener("click", () => {
      view.node.remove();
      for (const key of view.keys) calls.delete(key);
      for (const [k, g] of groups) if (g === view) groups.delete(k);
    });
    return view;
  }

  function refreshGroup(group) {
    const views = group.keys.map((k) => calls.get(k)).filter(Boolean);
    const open = views.filter((v) => v.state === "waiting" && v.controls);
    group.node.querySelector(".batch-size").textContent = views.length > 1
      ? `${views.length} calls of one response need a decision, in the model's order:` : "";
    group.actions.hidden = open.length < 2;
    group.approveAll.textContent = `Approve all ${open.length}`;
    group.rejectAll.textContent = `Reject all ${open.length}`;
    const settledAll = views.every((v) => v.state === "done");
    group.node.classList.toggle("settled", settledAll);
    group.dismiss.hidden = !settledAll;
  }

  function refresh() {
    for (const group of groups.values()) refreshGroup(group);
    const waiting = [...calls.values()].filter((v) => v.state === "waiting" || v.state === "busy");
    const mine = waiting.filter((v) => v.controls).length;
    status.textContent = waiting.length
      ? `${waiting.length} call${waiting.length === 1 ? "" : "s"} waiting` +
        (mine !== waiting.length ? ` · ${mine} you may decide` : "")
      : "Nothing is waiting for a decision.";
  }

  function render(items) {
    const listed = new Set(items.map(callKey));
    for (const view of calls.values()) {
      const key = callKey(view.item);
      if (listed.has(key)) {
        if (view.state === "checking") { // it was only missing from one list (a slow worker): still waiting
          view.state = "waiting"; view.node.dataset.state = "waiting"; view.outcome.hidden = true;
          view.node.querySelector(".since").hidden = false;
        }
      } else if (view.state === "waiting") {
        setOutcome(view, "checking", "checking", "No longer waiting here — checking who decided…");
        follow(view);
      }
    }
    const sorted = [...items].sort((a, b) => a.requested_at.localeCompare(b.requested_at) || position(a) - position(b));
    for (const item of sorted) {
      const key = callKey(item);
      if (calls.has(key)) continue;
      const gk = groupKey(item);
      let group = groups.get(gk);
      if (!group) { group = groupView(item); groups.set(gk, group); board.append(group.node); }
      const view = callView(item);
      calls.set(key, view);
      group.keys.push(key);
      group.keys.sort((a, b) => position(calls.get(a).item) - position(calls.get(b).item));
      group.list.replaceChildren(...group.keys.map((k) => calls.get(k).node));
    }
    refresh();
  }

  stream("/approvals/events", (kind, data) => { if (kind === "approvals") render(data); },
    { onError: (err) => { status.textContent = err.message; } });
});
