// The approvals inbox: every waiting call the caller may see, updated live from GET /approvals/events.
"use strict";

(async () => {
  const { api, stream, el, ago, argumentsForm, decisionControls } = DA;
  const calls = document.getElementById("calls");
  const status = document.getElementById("status");
  if (!DA.requireKey(calls)) { status.textContent = ""; return; }
  const me = await api("GET", "/me");
  document.getElementById("me").textContent = `signed in as ${me.id}` + (me.roles.length ? ` (${me.roles.join(", ")})` : "");
  const cards = new Map(); // "prompt/call" -> card

  function card(item) {
    const key = `${item.prompt_id}/${item.tool_call_id}`;
    const body = item.can_decide
      ? decisionControls(item.prompt_id, item, item.input_schema, () => { cards.get(key)?.remove(); cards.delete(key); })
      : el("div", {}, argumentsForm(item.input, item.input_schema, false)[0],
          el("p", { class: "muted not-allowed", text: `You may not decide this call (approvers: ${(item.approvers || []).join(", ") || "the owner and approvers"}).` }));
    return el("div", { class: "card call", "data-prompt": item.prompt_id, "data-call": item.tool_call_id, "data-tool": item.tool },
      el("div", { class: "row" }, el("strong", { class: "tool", text: item.tool }),
        el("span", { class: "muted", text: `asked by ${item.user_id || "?"} · ` }),
        el("span", { class: "muted since", title: item.requested_at, text: ago(item.requested_at) })),
      el("p", { class: "reason", text: item.reason }),
      body,
      el("p", { class: "muted" },
        el("a", { href: item.links.temporal_ui || "#", target: "_blank", text: `workflow ${item.prompt_id}` }),
        item.conversation_id ? " · " : null,
        item.conversation_id ? el("a", { href: item.links.chat, text: "conversation" }) : null));
  }

  function render(items) {
    const keys = new Set(items.map((i) => `${i.prompt_id}/${i.tool_call_id}`));
    for (const [key, node] of cards) if (!keys.has(key)) { node.remove(); cards.delete(key); }
    for (const item of items) {
      const key = `${item.prompt_id}/${item.tool_call_id}`;
      if (!cards.has(key)) { const node = card(item); cards.set(key, node); calls.prepend(node); }
    }
    status.textContent = cards.size ? `${cards.size} call(s) waiting` : "Nothing is waiting for a decision.";
  }

  stream("/approvals/events", (kind, data) => { if (kind === "approvals") render(data); },
    { onError: (err) => { status.textContent = err.message; } });
  setInterval(() => {
    for (const node of calls.querySelectorAll(".since")) node.textContent = ago(node.title);
  }, 5000);
})();
