// Durable Agent pages: a tiny client of the HTTP API. No build step, no dependencies, no inline script.
// The API key (or JWT) comes from the URL fragment (#key=...) once, then lives in sessionStorage. A key the
// API refuses (401) is dropped and the sign-in shows again with the reason; "Sign out" drops it on purpose.
"use strict";

const DA = (() => {
  const KEY = "dagent-key";
  const params = new URLSearchParams(location.hash.slice(1));
  if (params.get("key")) {
    sessionStorage.setItem(KEY, params.get("key"));
    params.delete("key");
    history.replaceState(null, "", location.pathname + location.search + (params.toString() ? "#" + params : ""));
  }
  const token = () => sessionStorage.getItem(KEY);
  const hashParam = (name) => new URLSearchParams(location.hash.slice(1)).get(name);

  function setHashParam(name, value) {
    const p = new URLSearchParams(location.hash.slice(1));
    p.set(name, value);
    history.replaceState(null, "", location.pathname + location.search + "#" + p);
  }

  // What people read instead of the wire names of prompt states.
  const STATES = {
    running: "working", waiting_for_approval: "waiting for approval", completed: "done",
    stopped: "stopped, not finished", failed: "failed", cancelled: "cancelled",
  };
  const stateLabel = (state) => STATES[state] || String(state || "").replace(/_/g, " ");

  class ApiError extends Error {
    constructor(problem, status) {
      super((problem && (problem.detail || problem.title)) || `request failed (${status})`);
      this.problem = problem || {};
      this.status = status;
    }
  }

  let signedOut = false;

  async function api(method, path, body) {
    if (signedOut) throw new ApiError({ detail: "signed out" }, 401);
    const headers = { Authorization: "Bearer " + token() };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await response.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch { data = { detail: text.slice(0, 200) }; }
    if (response.status === 401) keyRejected(data);
    if (!response.ok) throw new ApiError(data || { title: response.statusText }, response.status);
    return data;
  }

  // Server-sent events over fetch (EventSource cannot send an Authorization header). Reconnects with
  // Last-Event-ID after a dropped connection, so no event is missed or repeated; stops at `end`.
  // `onEvent` runs synchronously for each event, in stream order.
  function stream(path, onEvent, { onEnd, onError } = {}) {
    let lastId = null, stopped = false, controller = null;
    async function connect() {
      while (!stopped) {
        controller = new AbortController();
        try {
          const headers = { Authorization: "Bearer " + token() };
          if (lastId !== null) headers["Last-Event-ID"] = lastId;
          const response = await fetch(path, { headers, signal: controller.signal });
          if (!response.ok) {
            const problem = await response.json().catch(() => ({}));
            if (response.status === 401) keyRejected(problem);
            if (response.status === 404 || response.status >= 500) { await sleep(500); continue; }
            throw new ApiError(problem, response.status);
          }
          const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
          let buffer = "";
          for (;;) {
            const { value, done } = await reader.read();
            if (done) break;
            buffer = (buffer + value).replace(/\r\n/g, "\n");
            let cut;
            while ((cut = buffer.indexOf("\n\n")) >= 0) {
              const block = buffer.slice(0, cut); buffer = buffer.slice(cut + 2);
              const event = { event: "message", data: [], id: null };
              for (const line of block.split(/\r?\n/)) {
                if (!line || line.startsWith(":")) continue;
                const i = line.indexOf(":");
                const field = i < 0 ? line : line.slice(0, i);
                const val = i < 0 ? "" : line.slice(i + 1).replace(/^ /, "");
                if (field === "event") event.event = val;
                else if (field === "data") event.data.push(val);
                else if (field === "id") event.id = val;
              }
              if (!event.data.length) continue;
              if (event.id !== null) lastId = event.id;
              const data = JSON.parse(event.data.join("\n"));
              if (event.event === "end") { stopped = true; if (onEnd) onEnd(data); return; }
              if (!stopped) onEvent(event.event, data, event.id);
            }
          }
        } catch (err) {
          if (stopped) return;
          if (err instanceof ApiError) { stopped = true; if (onError) onError(err); return; }
        }
        if (!stopped) await sleep(500);
      }
    }
    connect();
    return { stop() { stopped = true; if (controller) controller.abort(); } };
  }

  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (v === null || v === undefined || v === false) continue;
      if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else if (k === "text") node.textContent = v;
      else node.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children.flat()) if (c !== null && c !== undefined && c !== false) node.append(c);
    return node;
  }

  function seconds(fromIso, toMs = Date.now()) {
    return Math.max(0, Math.round((toMs - new Date(fromIso).getTime()) / 1000));
  }

  function span(s) {
    if (s < 60) return s + " s";
    if (s < 3600) return Math.floor(s / 60) + " min " + (s % 60 ? (s % 60) + " s" : "");
    return Math.floor(s / 3600) + " h " + Math.round((s % 3600) / 60) + " min";
  }

  const ago = (iso) => span(seconds(iso)).trim() + " ago";

  // A live time: "3 s ago" (data-ago) or "12 s" (data-for), kept current by the page's clock below.
  const agoNode = (iso) => el("time", { datetime: iso, "data-ago": iso, title: iso, text: ago(iso) });
  const forNode = (iso) => el("time", { datetime: iso, "data-for": iso, title: "since " + iso, text: span(seconds(iso)).trim() });
  setInterval(() => {
    for (const node of document.querySelectorAll("[data-ago]")) node.textContent = ago(node.dataset.ago);
    for (const node of document.querySelectorAll("[data-for]")) node.textContent = span(seconds(node.dataset.for)).trim();
  }, 1000);

  // --- tool arguments, typed and labelled by the tool's JSON schema ----------------------------------

  const humanize = (name) => String(name).replace(/[_-]+/g, " ").replace(/^\w/, (c) => c.toUpperCase());

  function fieldInfo(schema, name) {
    const prop = (schema && schema.properties && schema.properties[name]) || {};
    let type = prop.type;
    if (!type && Array.isArray(prop.anyOf)) type = (prop.anyOf.find((t) => t.type && t.type !== "null") || {}).type;
    return {
      label: prop.title || humanize(name),
      description: prop.description || "",
      type,
      known: Boolean(schema && schema.properties && schema.properties[name]),
      required: Boolean(schema && Array.isArray(schema.required) && schema.required.includes(name)),
    };
  }

  const show = (value) => (typeof value === "string" ? value : JSON.stringify(value));

  // "amount 480 → 450, memo added" between two argument objects (empty when equal).
  function diffText(before, after, schema, verb = "") {
    const names = Array.from(new Set([...Object.keys(before || {}), ...Object.keys(after || {})]));
    const parts = [];
    for (const name of names) {
      const a = (before || {})[name], b = (after || {})[name];
      if (JSON.stringify(a) === JSON.stringify(b)) continue;
      const label = fieldInfo(schema, name).label.toLowerCase();
      if (a === undefined) parts.push(`${label} set to ${show(b)}`);
      else if (b === undefined || b === null) parts.push(`${label} removed (was ${show(a)})`);
      else parts.push(`${label} ${verb ? verb + " " : ""}${show(a)} → ${show(b)}`);
    }
    return parts.join(", ");
  }

  // Read-only arguments: label, value, and the schema's description.
  function argumentsList(input, schema) {
    const list = el("dl", { class: "args" });
    const props = (schema && schema.properties) || {};
    const names = Array.from(new Set([...Object.keys(props), ...Object.keys(input || {})]));
    for (const name of names) {
      if (!(name in (input || {}))) continue;
      const info = fieldInfo(schema, name);
      list.append(el("dt", { title: name, text: info.label }),
        el("dd", { "data-field": name }, el("span", { class: "value", text: show(input[name]) }),
          info.description ? el("small", { class: "help", text: info.description }) : null));
    }
    return list;
  }

  // An editable form for a tool's arguments. Returns { node, read() } where read() returns the arguments
  // or throws an Error naming the field that cannot be read; a line under the form shows what changed.
  function argumentsForm(input, schema, onChange) {
    const props = (schema && schema.properties) || {};
    const names = Array.from(new Set([...Object.keys(props), ...Object.keys(input || {})]));
    const readers = {};
    const form = el("div", { class: "args form" });
    for (const name of names) {
      const info = fieldInfo(schema, name);
      const type = info.type || typeof (input || {})[name];
      const value = (input || {})[name];
      const id = "f-" + Math.random().toString(36).slice(2);
      const fixed = props[name] && Object.prototype.hasOwnProperty.call(props[name], "const");
      if (fixed) { // a fact of the request (the schema allows one value): shown, never offered for editing
        form.append(el("div", { class: "field fact", "data-field": name },
          el("span", { class: "label", text: info.label + ": " }),
          el("span", { class: "value", text: typeof value === "string" ? value : JSON.stringify(value) }),
          info.description ? el("small", { class: "help", text: info.description }) : null));
        continue;
      }
      let field;
      if (type === "boolean") {
        field = el("input", { id, type: "checkbox", name, checked: !!value });
        readers[name] = () => field.checked;
      } else if (type === "number" || type === "integer") {
        field = el("input", { id, type: "number", name, step: "any", value: value ?? "", inputmode: "decimal" });
        readers[name] = () => {
          if (field.value === "") {
            if (info.required) throw new Error(`${info.label}: enter a number`);
            return value === undefined ? undefined : null;
          }
          const n = Number(field.value);
          if (!Number.isFinite(n)) throw new Error(`${info.label}: ${field.value} is not a number`);
          return n;
        };
      } else if (type === "object" || type === "array") {
        field = el("textarea", { id, name, rows: 3 });
        field.value = JSON.stringify(value ?? null);
        readers[name] = () => {
          try { return JSON.parse(field.value); } catch { throw new Error(`${info.label}: not valid JSON`); }
        };
      } else {
        field = el("input", { id, type: "text", name, value: value ?? "" });
        readers[name] = () => (field.value === "" && value === undefined ? undefined : field.value);
      }
      form.append(el("div", { class: "field" },
        el("label", { for: id, title: name, text: info.label + (info.known && !info.required ? " (optional)" : "") }),
        field,
        info.description ? el("small", { class: "help", text: info.description }) : null));
    }
    const changes = el("p", { class: "changes", hidden: true });
    form.append(changes);
    function read() {
      const out = {};
      for (const [k, f] of Object.entries(readers)) { const v = f(); if (v !== undefined) out[k] = v; }
      return out;
    }
    form.addEventListener("input", () => {
      let text = "";
      try { text = diffText(input, read(), schema); } catch (err) { text = err.message; }
      changes.hidden = !text;
      changes.textContent = text ? "Your correction: " + text : "";
      if (onChange) onChange(text);
    });
    return { node: form, read };
  }

  const sameJson = (a, b) => JSON.stringify(a) === JSON.stringify(b);

  function mayDecide(me, owner, approvers) {
    // `role:finance` names a role, `user:alice` or a bare `alice` a person (docs/approvals-policy.md); the API decides.
    if (approvers && approvers.length) {
      return approvers.some((a) => (a.startsWith("role:") ? me.roles.includes(a.slice(5))
        : (a.startsWith("user:") ? a.slice(5) : a) === me.id));
    }
    return me.id === owner || me.is_approver || me.is_admin;
  }

  // A tool's output in one short line ("sent: 450, to: ACME").
  function resultText(output) {
    if (output === null || output === undefined) return "no output";
    if (typeof output !== "object") return String(output);
    if (Array.isArray(output)) return JSON.stringify(output);
    return Object.entries(output).map(([k, v]) => `${k}: ${show(v)}`).join(", ");
  }

  const PAST = { approve: "approved", reject: "rejected" };

  // Why a decision did not apply, said to a person: "already rejected by alice 3 s ago".
  function refusalNode(err, kind) {
    const decision = err.problem && err.problem.decision;
    if (decision && decision.decision) {
      return el("span", {}, `Your ${kind === "approve" ? "approval" : "rejection"} was not applied: already ` +
        `${decision.decision} by ${decision.by || "someone"} `, agoNode(decision.at),
        decision.reason ? ` (“${decision.reason}”)` : "", ".");
    }
    return el("span", { text: `Not ${PAST[kind]}: ${err.message}` });
  }

  // Approve / correct-and-approve / reject controls for one pending call. `onSettled(outcome)` gets
  // {kind, resolved, correction} after a decision was applied, or {kind, error} when it was refused.
  // A button's visible word plus, for screen readers, which call it decides: "Approve payment.send to bob …".
  function labelled(button, visible, call) {
    const which = ` ${call.tool} ${argumentsText(call.input)} (${call.tool_call_id})`;
    button.replaceChildren(visible, el("span", { class: "sr-only", text: which }));
  }
  const argumentsText = (input) => Object.entries(input || {}).slice(0, 3)
    .map(([k, v]) => `${k} ${typeof v === "string" ? v : JSON.stringify(v)}`).join(", ");

  function decisionControls(promptId, call, schema, { onSettled, onStart } = {}) {
    const approveButton = el("button", { type: "button", class: "approve" });
    labelled(approveButton, "Approve", call);
    const form = argumentsForm(call.input, schema, (change) => {
      labelled(approveButton, change ? "Approve with correction" : "Approve", call);
    });
    const reason = el("input", { type: "text", name: "reason", placeholder: "reason (for a rejection)",
      "aria-label": `reason for rejecting ${call.tool} (${call.tool_call_id})` });
    const rejectButton = el("button", { type: "button", class: "reject" });
    labelled(rejectButton, "Reject", call);
    const status = el("div", { class: "decision-status", role: "status" });
    const base = `/prompts/${encodeURIComponent(promptId)}/approvals/${encodeURIComponent(call.tool_call_id)}`;
    let busy = false;

    async function decide(kind, batchReason) {
      if (busy) return null;
      const why = batchReason !== undefined && !reason.value ? batchReason : reason.value;
      status.className = "decision-status"; status.textContent = "";
      let body = {}, correction = "";
      try {
        if (kind === "approve") {
          const edited = form.read();
          if (!sameJson(edited, call.input)) {
            body = { input: edited };
            correction = diffText(call.input, edited, schema);
          }
        } else if (why) body = { reason: why };
      } catch (err) {
        status.className = "decision-status error"; status.textContent = err.message;
        return null;
      }
      busy = true;
      for (const b of [approveButton, rejectButton]) b.disabled = true;
      status.textContent = kind === "approve" ? "Approving…" : "Rejecting…";
      if (onStart) onStart(kind);
      try {
        const resolved = await api("POST", `${base}/${kind}`, body);
        const outcome = { kind, resolved, correction, reason: why };
        status.textContent = "";
        if (onSettled) onSettled(outcome);
        return outcome;
      } catch (err) {
        busy = false;
        for (const b of [approveButton, rejectButton]) b.disabled = false;
        status.className = "decision-status error";
        status.replaceChildren(err.status === 409 ? refusalNode(err, kind) : el("span", { text: err.message }));
        const outcome = { kind, error: err };
        if (onSettled) onSettled(outcome);
        return outcome;
      }
    }
    approveButton.addEventListener("click", () => decide("approve"));
    rejectButton.addEventListener("click", () => decide("reject"));
    reason.addEventListener("keydown", (e) => { if (e.key === "Enter") { e.preventDefault(); decide("reject"); } });
    const node = el("div", { class: "decision" }, form.node,
      el("div", { class: "row buttons" }, approveButton, reason, rejectButton), status);
    return { node, decide, isBusy: () => busy };
  }

  // --- signing in and out ----------------------------------------------------------------------------

  function showSignIn(message) {
    signedOut = true;
    const box = document.getElementById("signin");
    const content = document.getElementById("content");
    if (content) content.hidden = true;
    document.getElementById("me").textContent = "";
    document.getElementById("signout").hidden = true;
    const input = el("input", { type: "password", placeholder: "API key or token", name: "key",
      autocomplete: "current-password", "aria-label": "API key or token", required: true });
    const form = el("form", { class: "card signin" },
      message ? el("p", { class: "error", role: "alert", text: message }) : null,
      el("p", { text: "Sign in with your API key:" }),
      el("div", { class: "row" }, input, el("button", { type: "submit", text: "Continue" })));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      if (!input.value.trim()) return;
      sessionStorage.setItem(KEY, input.value.trim());
      location.reload();
    });
    box.replaceChildren(form);
    box.hidden = false;
    input.focus();
  }

  function keyRejected(problem) {
    if (signedOut) return;
    sessionStorage.removeItem(KEY);
    const why = problem && (problem.detail || problem.title);
    showSignIn("That key was not accepted" + (why ? ` (${why})` : "") + ". Sign in again.");
  }

  function signOut() {
    sessionStorage.removeItem(KEY);
    showSignIn("Signed out.");
  }

  // Sign the page in, then run its script, `page(me)`, with the caller (`GET /me`) once the key is accepted;
  // without an accepted key the sign-in shows and the script does not run.
  async function start(page) {
    document.getElementById("signout").addEventListener("click", signOut);
    if (!token()) { showSignIn(""); return; }
    let me;
    try {
      me = await api("GET", "/me");
    } catch (err) {
      if (err.status !== 401) showSignIn(`The API did not answer (${err.message}). Reload to try again.`);
      return;
    }
    document.getElementById("me").textContent = `signed in as ${me.id}` + (me.roles.length ? ` (${me.roles.join(", ")})` : "");
    document.getElementById("signout").hidden = false;
    document.getElementById("signin").hidden = true;
    document.getElementById("content").hidden = false;
    await page(me);
  }

  // A file a tool attached, as a link: the download needs the API key (a header), so the click fetches it and
  // hands the browser a blob to save under the file's name (GET /prompts/{id}/files/{index}, an attachment).
  function fileLink(promptId, index, entry) {
    const link = el("a", { href: `/prompts/${encodeURIComponent(promptId)}/files/${index}`, class: "file-link",
      download: entry.name, "aria-label": `Download ${entry.name}`, text: `Download ${entry.name}` });
    link.addEventListener("click", async (event) => {
      event.preventDefault();
      link.setAttribute("aria-busy", "true");
      try {
        const response = await fetch(link.getAttribute("href"), { headers: { Authorization: "Bearer " + token() } });
        if (!response.ok) throw new Error(`${response.status} ${response.statusText}`);
        const url = URL.createObjectURL(await response.blob());
        const save = el("a", { href: url, download: entry.name, hidden: true });
        document.body.append(save);
        save.click();
        save.remove();
        setTimeout(() => URL.revokeObjectURL(url), 60000);
        link.dataset.downloaded = "true";
      } catch (err) {
        link.after(el("span", { class: "error", role: "alert", text: ` could not download: ${err.message}` }));
      } finally {
        link.removeAttribute("aria-busy");
      }
    });
    return link;
  }

  return {
    fileLink, api, stream, el, ago, agoNode, forNode, argumentsForm, argumentsList, decisionControls, mayDecide, hashParam,
    setHashParam, start, stateLabel, diffText, resultText, fieldInfo, PAST,
  };
})();
