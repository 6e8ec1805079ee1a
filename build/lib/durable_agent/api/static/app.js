// Durable Agent pages: a tiny client of the HTTP API. No build step, no dependencies.
// The API key (or JWT) comes from the URL fragment (#key=...) once, then lives in sessionStorage.
"use strict";

const DA = (() => {
  const params = new URLSearchParams(location.hash.slice(1));
  if (params.get("key")) {
    sessionStorage.setItem("dagent-key", params.get("key"));
    params.delete("key");
    history.replaceState(null, "", location.pathname + location.search + (params.toString() ? "#" + params : ""));
  }
  const token = () => sessionStorage.getItem("dagent-key");
  const hashParam = (name) => new URLSearchParams(location.hash.slice(1)).get(name);

  function setHashParam(name, value) {
    const p = new URLSearchParams(location.hash.slice(1));
    p.set(name, value);
    history.replaceState(null, "", location.pathname + location.search + "#" + p);
  }

  class ApiError extends Error {
    constructor(problem) { super(problem.detail || problem.title || "request failed"); this.problem = problem; }
  }

  async function api(method, path, body) {
    const headers = { Authorization: "Bearer " + token() };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await response.text();
    const data = text ? JSON.parse(text) : null;
    if (!response.ok) throw new ApiError(data || { status: response.status, title: response.statusText });
    return data;
  }

  // Server-sent events over fetch (EventSource cannot send an Authorization header). Reconnects with
  // Last-Event-ID after a dropped connection, so no event is missed or repeated; stops at `end`.
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
            if (response.status === 404 || response.status >= 500) { await sleep(500); continue; }
            throw new ApiError(problem);
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
              onEvent(event.event, data, event.id);
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
    for (const c of children.flat()) if (c !== null && c !== undefined) node.append(c);
    return node;
  }

  function ago(iso) {
    const s = Math.max(0, Math.round((Date.now() - new Date(iso).getTime()) / 1000));
    if (s < 60) return s + " s ago";
    if (s < 3600) return Math.round(s / 60) + " min ago";
    return Math.round(s / 3600) + " h ago";
  }

  // A form for a tool's arguments, typed by its JSON schema. Returns [element, read()].
  function argumentsForm(input, schema, editable) {
    const props = (schema && schema.properties) || {};
    const names = Array.from(new Set([...Object.keys(props), ...Object.keys(input || {})]));
    const readers = {};
    const form = el("div", { class: "args" });
    for (const name of names) {
      const type = (props[name] && props[name].type) || typeof (input || {})[name];
      const value = (input || {})[name];
      let field;
      if (type === "boolean") {
        field = el("input", { type: "checkbox", name, checked: !!value, disabled: !editable });
        readers[name] = () => field.checked;
      } else if (type === "number" || type === "integer") {
        field = el("input", { type: "number", name, step: "any", value: value ?? "", disabled: !editable });
        readers[name] = () => (field.value === "" ? null : Number(field.value));
      } else if (type === "object" || type === "array") {
        field = el("textarea", { name, rows: 3, cols: 40, disabled: !editable });
        field.value = JSON.stringify(value ?? null);
        readers[name] = () => JSON.parse(field.value);
      } else {
        field = el("input", { type: "text", name, value: value ?? "", disabled: !editable });
        readers[name] = () => field.value;
      }
      form.append(el("label", {}, el("span", { text: name }), field));
    }
    const read = () => Object.fromEntries(Object.entries(readers).map(([k, f]) => [k, f()]));
    return [form, read];
  }

  const sameJson = (a, b) => JSON.stringify(a) === JSON.stringify(b);

  function mayDecide(me, owner, approvers) {
    if (approvers && approvers.length) return approvers.includes(me.id) || me.roles.some((r) => approvers.includes(r));
    return me.id === owner || me.is_approver || me.is_admin;
  }

  // Approve / edit-and-approve / reject controls for one pending call.
  function decisionControls(promptId, call, schema, onDone) {
    const [form, read] = argumentsForm(call.input, schema, true);
    const reason = el("input", { type: "text", name: "reason", placeholder: "reason (for a rejection)" });
    const status = el("div", { class: "error decision-error" });
    const base = `/prompts/${encodeURIComponent(promptId)}/approvals/${encodeURIComponent(call.tool_call_id)}`;
    async function decide(kind) {
      status.textContent = "";
      let body = {};
      try {
        if (kind === "approve") {
          const edited = read();
          if (!sameJson(edited, call.input)) body = { input: edited };
        } else if (reason.value) body = { reason: reason.value };
        const resolved = await api("POST", `${base}/${kind}`, body);
        if (onDone) onDone(resolved);
      } catch (err) { status.textContent = err.message; }
    }
    const buttons = el("div", { class: "row" },
      el("button", { class: "approve", onclick: () => decide("approve") , text: "Approve" }),
      reason,
      el("button", { class: "reject", onclick: () => decide("reject"), text: "Reject" }));
    return el("div", { class: "decision" }, form, buttons, status);
  }

  function requireKey(container) {
    if (token()) return true;
    const input = el("input", { type: "password", placeholder: "API key or token", name: "key" });
    container.append(el("div", { class: "card" }, el("p", { text: "Sign in with your API key:" }),
      el("div", { class: "row" }, input, el("button", {
        text: "Continue", onclick: () => { sessionStorage.setItem("dagent-key", input.value); location.reload(); },
      }))));
    return false;
  }

  return { api, stream, el, ago, argumentsForm, decisionControls, mayDecide, hashParam, setHashParam, requireKey };
})();
