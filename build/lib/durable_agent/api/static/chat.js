// The chat page: one conversation; every prompt streams its text, tool calls (with status and inline
// approvals), widgets and files live from GET /prompts/{id}/events.
"use strict";

(async () => {
  const { api, stream, el, decisionControls, mayDecide } = DA;
  const list = document.getElementById("prompts");
  if (!DA.requireKey(list)) return;
  const me = await api("GET", "/me");
  document.getElementById("me").textContent = `signed in as ${me.id}`;
  let conversationId = DA.hashParam("conversation");
  if (!conversationId) {
    conversationId = (await api("POST", "/conversations", {})).conversation.id;
    DA.setHashParam("conversation", conversationId);
  }
  document.getElementById("conversation").textContent = `conversation ${conversationId}`;

  function toolStatus(entry) {
    const r = entry.result;
    if (!r) return "running";
    if (r.type === "pending") return "waiting for approval";
    if (r.type === "success") return "done";
    return "failed";
  }

  function renderOutput(prompt, entry) {
    switch (entry.type) {
      case "text": return el("div", { class: "card msg assistant", text: entry.text });
      case "message": return el("div", { class: "card msg " + entry.role, text: entry.text });
      case "widget": return el("div", { class: "card widget", "data-widget": entry.widget },
        el("strong", { text: entry.widget }), el("pre", { text: JSON.stringify(entry.data, null, 2) }));
      case "file": return el("div", { class: "card file" }, el("strong", { text: "📄 " + entry.name }),
        el("span", { class: "muted", text: ` ${entry.media_type}, ${entry.size} bytes — ${entry.summary}` }));
      case "data": return el("div", { class: "card data" }, el("pre", { text: JSON.stringify(entry.data, null, 2) }));
      case "tool": {
        const status = toolStatus(entry);
        const node = el("div", { class: "card tool", "data-call": entry.id, "data-status": status },
          el("div", { class: "row" }, el("strong", { text: "🔧 " + entry.tool }),
            el("span", { class: "status", text: status }),
            entry.decision ? el("span", { class: "muted", text: `${entry.decision.decision} by ${entry.decision.by || "—"}` }) : null),
          el("pre", { class: "input", text: JSON.stringify(entry.input) }));
        if (entry.result && entry.result.type === "success") node.append(el("pre", { class: "result", text: JSON.stringify(entry.result.output) }));
        if (entry.result && entry.result.type === "error") node.append(el("p", { class: "error", text: entry.result.error }));
        if (entry.result && entry.result.type === "pending") {
          node.append(el("p", { class: "reason", text: entry.result.reason }));
          if (mayDecide(me, prompt.user_id, entry.result.approvers)) {
            node.append(decisionControls(prompt.id, { tool_call_id: entry.id, input: entry.input }, prompt.schemas[entry.id], null));
          } else {
            node.append(el("p", { class: "muted", text: `Waiting for ${entry.result.approvers.join(", ")}.` }));
          }
        }
        return node;
      }
      default: return el("pre", { text: JSON.stringify(entry) });
    }
  }

  function promptBlock(promptId) {
    const state = { id: promptId, user_id: me.id, outputs: [], streaming: "", stateName: "", schemas: {} };
    const outputs = el("div", { class: "outputs" });
    const live = el("div", { class: "card msg assistant streaming" });
    const header = el("div", { class: "row muted" });
    const block = el("section", { class: "prompt", "data-prompt": promptId }, header, el("div", { class: "card msg user input" }), outputs, live);
    list.append(block);
    function render() {
      outputs.replaceChildren(...state.outputs.filter(Boolean).map((e) => renderOutput(state, e)));
      live.textContent = state.streaming;
      live.style.display = state.streaming ? "" : "none";
      block.dataset.state = state.stateName;
      header.replaceChildren(el("span", { class: "state", text: state.stateName }), " · ",
        el("a", { href: state.ui || "#", target: "_blank", class: "temporal-ui", text: `workflow ${promptId}` }));
    }
    (async () => {
      const record = await retry(() => api("GET", `/prompts/${encodeURIComponent(promptId)}`));
      state.user_id = record.prompt.user_id;
      state.ui = record.links.temporal_ui;
      state.stateName = record.prompt.state;
      block.querySelector(".input").textContent = record.prompt.input || "";
      render();
      stream(`/prompts/${encodeURIComponent(promptId)}/events`, async (kind, data) => {
        if (kind === "text_delta") { state.streaming = state.streaming.slice(0, data.offset) + data.text; }
        else if (kind === "state_changed") { state.stateName = data.state; }
        else if (data.output) {
          if (data.output.type === "text") state.streaming = "";
          if (kind === "approval_requested") {
            const pending = await api("GET", "/approvals").catch(() => []);
            const found = pending.find((p) => p.prompt_id === promptId && p.tool_call_id === data.output.id);
            if (found) state.schemas[data.output.id] = found.input_schema;
          }
          state.outputs[data.index] = data.output;
        }
        render();
      }, { onEnd: (end) => { state.stateName = end.state; state.streaming = ""; render(); } });
    })();
  }

  async function retry(fn) {
    for (let i = 0; ; i++) {
      try { return await fn(); } catch (err) { if (i > 60) throw err; await new Promise((r) => setTimeout(r, 500)); }
    }
  }

  const conversation = await api("GET", `/conversations/${encodeURIComponent(conversationId)}`);
  const known = [...conversation.conversation.prompt_ids];
  if (conversation.conversation.running_prompt_id && !known.includes(conversation.conversation.running_prompt_id)) {
    known.push(conversation.conversation.running_prompt_id);
  }
  known.forEach(promptBlock);

  document.getElementById("send").addEventListener("submit", async (event) => {
    event.preventDefault();
    const input = document.getElementById("input");
    const error = document.getElementById("send-error");
    error.textContent = "";
    if (!input.value.trim()) return;
    try {
      const sent = await api("POST", `/conversations/${encodeURIComponent(conversationId)}/messages`, { input: input.value });
      input.value = "";
      promptBlock(sent.id);
    } catch (err) { error.textContent = err.message; }
  });
})();
