// The chat page: one conversation; every prompt streams its text, tool calls (with progress, status and
// inline approvals), widgets and files live from GET /prompts/{id}/events. What a prompt shows is derived
// from its event stream alone, applied synchronously in offset order: nothing fetched on the side (the
// schemas that label an approval form) can overwrite a later event, so a reload shows what is true now.
"use strict";

DA.start(async (me) => {
  const { api, stream, el, agoNode, forNode, argumentsList, decisionControls, mayDecide, stateLabel } = DA;
  const list = document.getElementById("prompts");
  // The conversation: the one in the address, else the one this person had open last (kept in this browser),
  // else a new one. "New conversation" starts another.
  const remembered = `dagent.chat.conversation.${me.id}`;
  let conversationId = DA.hashParam("conversation") || localStorage.getItem(remembered);
  if (conversationId && !DA.hashParam("conversation")) {
    try { await api("GET", `/conversations/${encodeURIComponent(conversationId)}`); } catch { conversationId = null; }
  }
  if (!conversationId) conversationId = (await api("POST", "/conversations", {})).conversation.id;
  DA.setHashParam("conversation", conversationId);
  localStorage.setItem(remembered, conversationId);
  const newConversation = el("button", { type: "button", class: "link new-conversation", text: "New conversation" });
  newConversation.addEventListener("click", async () => {
    const fresh = (await api("POST", "/conversations", {})).conversation.id;
    localStorage.setItem(remembered, fresh);
    DA.setHashParam("conversation", fresh);
    location.reload();
  });
  document.getElementById("conversation").textContent = `conversation ${conversationId}`;
  document.getElementById("conversation").after(el("p", { class: "small" }, newConversation));

  // Approvers as people read them: "alice", "anyone with the finance role".
  function people(approvers) {
    const words = (approvers || []).map((a) => a.startsWith("role:") ? `anyone with the ${a.slice(5)} role`
      : a.replace(/^user:/, ""));
    return words.length <= 1 ? (words[0] || "an approver") : `${words.slice(0, -1).join(", ")} or ${words[words.length - 1]}`;
  }

  // A call decided while others of its batch still wait for their decisions has no result yet: it neither runs
  // nor waits for a decision of its own. How many decisions it waits for (null: not such a call).
  function waitsForOthers(prompt, entry) {
    if (!entry.decision || (entry.result && entry.result.type !== "pending")) return null;
    if (prompt.stateName !== "waiting_for_approval") return null;
    return prompt.outputs.filter((e) => e && e.type === "tool" && e.id !== entry.id && e.result
      && e.result.type === "pending" && !e.decision).length;
  }

  function afterOthersText(entry, others) {
    if (entry.decision.decision !== "approved") {
      return others ? "; the model hears of it once the rest of its batch is decided" : "";
    }
    if (!others) return "; runs now";
    return `; runs when the other ${others} decision${others > 1 ? "s are" : " is"} in`;
  }

  function toolStatus(entry, others) {
    const r = entry.result;
    if (others !== null) return entry.decision.decision;
    if (!r) return "running";
    if (r.type === "pending") return "waiting for approval";
    if (r.type === "success") return "done";
    if (entry.decision && entry.decision.decision !== "approved") return entry.decision.decision;
    return "failed";
  }

  function decisionLines(entry, schema, others) {
    const d = entry.decision;
    if (!d) return [];
    const lines = [el("p", { class: "decided muted" }, `${d.decision} by ${d.by || "—"} `, agoNode(d.at),
      d.reason ? ` — “${d.reason}”` : "", others !== null ? afterOthersText(entry, others) : "")];
    if (d.original_input !== null && d.original_input !== undefined) {
      const change = DA.diffText(d.original_input, entry.input, schema, "changed");
      if (change) lines.push(el("p", { class: "correction", text: `${change} by ${d.by || "the approver"}` }));
    }
    return lines;
  }

  function progressLine(progress) {
    if (!progress) return null;
    const pct = typeof progress.fraction === "number" ? Math.round(progress.fraction * 100) : null;
    return el("div", { class: "progress" },
      pct !== null ? el("progress", { max: "100", value: String(pct) }) : null,
      el("span", { text: progress.message + (pct !== null ? ` · ${pct}%` : "") }));
  }

  function toolCard(prompt, entry) {
    const others = waitsForOthers(prompt, entry);
    const status = toolStatus(entry, others);
    const schema = prompt.schemas[entry.id] || null;
    const pending = others === null && entry.result && entry.result.type === "pending" ? entry.result : null;
    const since = pending ? pending.requested_at : !entry.result && others === null ? entry.started_at : null;
    const node = el("div", { class: "card tool", "data-call": entry.id, "data-status": status },
      el("div", { class: "row head" }, el("span", { class: "badge", text: "tool" }), el("strong", { text: entry.tool }),
        el("span", { class: "status", text: status }),
        since ? el("span", { class: "muted elapsed" }, "· ", forNode(since)) : null),
      ...decisionLines(entry, schema, others),
      entry.result ? null : progressLine(prompt.progress.get(entry.id)));
    if (pending) {
      node.append(el("p", { class: "reason", text: pending.reason }));
      if (mayDecide(me, prompt.user_id, pending.approvers)) {
        const controls = decisionControls(prompt.id, { tool_call_id: entry.id, tool: entry.tool, input: entry.input }, schema, {
          onSettled: (outcome) => {
            if (outcome.error && outcome.error.status === 409) { prompt.notes.set(entry.id, outcome.error); prompt.render(); }
          },
        });
        node.append(controls.node);
      } else {
        node.append(argumentsList(entry.input, schema), el("p", { class: "muted", text:
          `Waiting for ${people(pending.approvers)}.` }));
      }
    } else {
      node.append(argumentsList(entry.input, schema));
    }
    if (entry.result && entry.result.type === "success") {
      const output = entry.result.output;
      node.append(el("pre", { class: "result", text: typeof output === "string" ? output : JSON.stringify(output) }));
    }
    if (entry.result && entry.result.type === "error") node.append(el("p", { class: "error", text: entry.result.error }));
    const note = prompt.notes.get(entry.id);
    if (note && !pending) node.append(el("p", { class: "muted note", text: `(Your decision was not applied: ${note.message})` }));
    return node;
  }

  function renderOutput(prompt, entry, index) {
    switch (entry.type) {
      case "text": return el("div", { class: "card msg assistant", text: entry.text });
      case "message": return el("div", { class: "card msg " + entry.role, text: entry.text });
      case "widget": return el("div", { class: "card widget", "data-widget": entry.widget },
        el("strong", { text: entry.widget }), el("pre", { text: JSON.stringify(entry.data, null, 2) }));
      case "file": return el("div", { class: "card file" }, el("strong", { text: entry.name }),
        el("span", { class: "muted", text: ` ${entry.media_type}, ${entry.size} bytes — ${entry.summary} ` }),
        DA.fileLink(prompt.id, index, entry));
      case "data": return el("div", { class: "card data" }, el("pre", { text: JSON.stringify(entry.data, null, 2) }));
      case "reasoning": return entry.summary ? el("details", { class: "card reasoning" },
        el("summary", { class: "muted", text: "reasoning" }), el("p", { text: entry.summary })) : el("span");
      case "tool": return toolCard(prompt, entry);
      default: return el("pre", { text: JSON.stringify(entry) });
    }
  }

  // What a rendered entry depends on: it is rebuilt only when this changes (so a form being edited stays).
  function signature(prompt, entry) {
    if (!entry || entry.type !== "tool") return JSON.stringify(entry);
    return JSON.stringify([entry, prompt.progress.get(entry.id) || null, Boolean(prompt.schemas[entry.id]),
      prompt.notes.has(entry.id), waitsForOthers(prompt, entry)]);
  }

  function promptBlock(promptId) {
    document.getElementById("empty").hidden = true;
    const prompt = { id: promptId, user_id: me.id, outputs: [], streaming: "", stateName: "", schemas: {},
      progress: new Map(), notes: new Map(), rendered: [], asking: false };
    const outputs = el("div", { class: "outputs" });
    const live = el("div", { class: "card msg assistant streaming" });
    const header = el("div", { class: "row muted prompt-head" });
    const block = el("section", { class: "prompt", "data-prompt": promptId }, header,
      el("div", { class: "card msg user input" }), outputs, live);
    list.append(block);

    // Labels and descriptions for an approval form: the tool's schema, from GET /prompts/{id}/approvals (the
    // prompt's own list, read from the prompt itself: a call its stream shows waiting is in it), the same
    // request on a fresh load and after a reload. Kept apart from `outputs`, so it can never undo a later event.
    let failures = 0;
    function askSchemas() {
      const missing = prompt.outputs.some((e) => e && e.type === "tool" && e.result && e.result.type === "pending"
        && !(e.id in prompt.schemas));
      if (!missing || prompt.asking || failures >= 10) return;
      prompt.asking = true;
      api("GET", `/prompts/${encodeURIComponent(promptId)}/approvals`).then((items) => {
        for (const item of items) prompt.schemas[item.tool_call_id] = item.input_schema || null;
        // A call already decided is no longer listed: nothing to label, so it is not asked about again.
        for (const e of prompt.outputs) {
          if (e && e.type === "tool" && e.result && e.result.type === "pending" && !(e.id in prompt.schemas)) {
            prompt.schemas[e.id] = null;
          }
        }
        prompt.asking = false;
        render();
      }).catch(() => {
        failures += 1;
        setTimeout(() => { prompt.asking = false; render(); }, 1000);
      });
    }

    prompt.render = render;
    function render() {
      prompt.outputs.forEach((entry, index) => {
        if (!entry) return;
        const sig = signature(prompt, entry);
        const known = prompt.rendered[index];
        if (known && known.sig === sig) return;
        const node = renderOutput(prompt, entry, index);
        if (known) known.node.replaceWith(node);
        else {
          const next = prompt.rendered.slice(index + 1).find(Boolean);
          outputs.insertBefore(node, next ? next.node : null);
        }
        prompt.rendered[index] = { sig, node };
      });
      live.textContent = prompt.streaming;
      live.hidden = !prompt.streaming;
      block.dataset.state = prompt.stateName;
      header.replaceChildren(el("span", { class: "state", "data-state": prompt.stateName, text: stateLabel(prompt.stateName) }),
        " · ", el("a", { href: prompt.ui || "#", target: "_blank", rel: "noopener", class: "temporal-ui",
          text: `workflow ${promptId}` }));
      const running = ["running", "waiting_for_approval"].includes(prompt.stateName);
      if (running && prompt.user_id === me.id) {  // the owner may cancel it (POST /prompts/{id}/cancel)
        const cancel = el("button", { type: "button", class: "cancel", text: "Cancel",
          "aria-label": `Cancel the prompt ${promptId}` });
        cancel.addEventListener("click", () => {
          cancel.disabled = true;
          api("POST", `/prompts/${encodeURIComponent(promptId)}/cancel`).catch((err) => {
            cancel.disabled = false;
            header.append(el("span", { class: "error", role: "alert", text: ` could not cancel: ${err.message}` }));
          });
        });
        header.append(" · ", cancel);
      }
      const decidable = prompt.outputs.filter((e) => e && e.type === "tool" && e.result && e.result.type === "pending"
        && !e.decision && mayDecide(me, prompt.user_id, e.result.approvers));
      if (decidable.length > 1) {  // a batch: every call this person may decide, approved one after the other
        const all = el("button", { type: "button", class: "approve approve-all", text: `Approve all ${decidable.length}`,
          "aria-label": `Approve all ${decidable.length}: ${decidable.map((e) => e.tool).join(", ")}` });
        all.addEventListener("click", async () => {
          all.disabled = true;
          for (const e of decidable) {
            try {
              await api("POST", `/prompts/${encodeURIComponent(promptId)}/approvals/${encodeURIComponent(e.id)}/approve`, {});
            } catch (err) { prompt.notes.set(e.id, err); }
          }
          render();
        });
        header.append(" · ", all);
      }
      if (prompt.stateName === "stopped") {
        if (prompt.stop) header.append(el("div", { class: "stop-note", role: "status", text: prompt.stop }));
        else if (!prompt.askedStop) {  // why it stopped and how to go on: the record's `stop`
          prompt.askedStop = true;
          api("GET", `/prompts/${encodeURIComponent(promptId)}`).then((record) => {
            const stop = record.prompt.stop;
            prompt.stop = stop ? `Stopped: ${stop.reason}. ${stop.next_step}` : "Stopped before the work was done.";
            render();
          }).catch(() => { prompt.askedStop = false; });
        }
      }
      askSchemas();
    }

    function onEvent(kind, data) {
      announce(kind, data);
      if (kind === "text_delta") {
        if (data.kind !== "reasoning") prompt.streaming = prompt.streaming.slice(0, data.offset) + data.text;
      } else if (kind === "tool_progress") {
        prompt.progress.set(data.tool_call_id, data);
      } else if (kind === "state_changed") {
        prompt.stateName = data.state;
      } else if (data.output) {
        if (data.output.type === "text") prompt.streaming = "";
        if (data.output.type === "tool" && data.output.result) prompt.progress.delete(data.output.id);
        prompt.outputs[data.index] = data.output;
      }
      render();
    }

    (async () => {
      const record = await retry(() => api("GET", `/prompts/${encodeURIComponent(promptId)}`));
      prompt.user_id = record.prompt.user_id;
      prompt.ui = record.links.temporal_ui;
      prompt.stateName = prompt.stateName || record.prompt.state;
      block.querySelector(".input").textContent = record.prompt.input || "";
      render();
      stream(`/prompts/${encodeURIComponent(promptId)}/events`, onEvent, {
        onEnd: (end) => { prompt.stateName = end.state; prompt.streaming = ""; prompt.progress.clear(); render(); },
      });
    })();
  }

  // Arrivals and decisions, said once in the live region (screen readers hear them; the text streams silently).
  function announce(kind, data) {
    const live = document.getElementById("live");
    const entry = data && data.output;
    let said = "";
    if (kind === "approval_requested" && entry) said = `${entry.tool} waits for approval`;
    else if (entry && entry.type === "tool" && entry.decision && (!entry.result || entry.result.type === "pending")) {
      said = `${entry.tool} ${entry.decision.decision} by ${entry.decision.by || "someone"}`;
    } else if (kind === "output_added" && entry && entry.type === "text") said = "The agent answered.";
    else if (kind === "state_changed" && data.state && data.state !== "running") said = `The prompt is ${stateLabel(data.state)}.`;
    if (!said || !live) return;
    live.append(el("span", { text: said + " " }));
    while (live.childElementCount > 5) live.firstElementChild.remove();  // the latest few, newest last
  }

  async function retry(fn) {
    for (let i = 0; ; i++) {
      try { return await fn(); } catch (err) {
        if (i > 60 || err.status === 401 || err.status === 403) throw err;
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  }

  const conversation = await api("GET", `/conversations/${encodeURIComponent(conversationId)}`);
  const known = [...conversation.conversation.prompt_ids];
  if (conversation.conversation.running_prompt_id && !known.includes(conversation.conversation.running_prompt_id)) {
    known.push(conversation.conversation.running_prompt_id);
  }
  document.getElementById("empty").hidden = known.length > 0;
  known.forEach(promptBlock);

  const input = document.getElementById("input");
  input.focus();

  document.getElementById("send").addEventListener("submit", async (event) => {
    event.preventDefault();
    const error = document.getElementById("send-error");
    error.textContent = "";
    if (!input.value.trim()) return;
    try {
      const sent = await api("POST", `/conversations/${encodeURIComponent(conversationId)}/messages`, { input: input.value });
      input.value = "";
      promptBlock(sent.id);
    } catch (err) { error.textContent = err.message; }
  });
});
