// simlock web console. Plain JavaScript, no dependencies: it calls the
// same /v1 routes as any client with a bearer token kept in this tab's
// sessionStorage, follows GET /v1/events (Server-Sent Events, read with
// fetch so the token travels in a header, never in a URL) and re-reads
// status when an event says something changed. Every value from the
// daemon reaches the page through textContent, never as HTML.
"use strict";

const TOKEN = "simlock.token";
const ROLE = "simlock.role";
const MAX_EVENTS = 60;

const state = {
  token: "",
  role: "",
  status: null,
  workers: null,
  skewMs: 0, // daemon clock minus this browser's clock
  lastSeq: 0,
  stream: null, // AbortController of the event stream
  refreshTimer: 0,
  refreshing: false,
  refreshAgain: false,
};

const $ = (id) => document.getElementById(id);

// el builds an element; children are nodes or strings (as text).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children) {
    if (c === undefined || c === null) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function fill(tbody, rows, empty, span) {
  tbody.replaceChildren(...(rows.length ? rows : [el("tr", { class: "empty" }, el("td", { colspan: span }, empty))]));
}

const isOperator = () => state.role === "admin";
const now = () => Date.now() + state.skewMs;

function fmtDur(ms) {
  const neg = ms < 0;
  let s = Math.floor(Math.abs(ms) / 1000);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  s %= 60;
  const pad = (n) => String(n).padStart(2, "0");
  const out = h ? `${h}h${pad(m)}m${pad(s)}s` : m ? `${m}m${pad(s)}s` : `${s}s`;
  return neg ? "-" + out : out;
}

function fmtBytes(n) {
  const gib = n / (1 << 30);
  return gib >= 1 ? gib.toFixed(1) + " GiB" : Math.round(n / (1 << 20)) + " MiB";
}

function toast(msg, bad) {
  const t = $("toast");
  t.textContent = msg;
  t.className = bad ? "show bad" : "show";
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => (t.className = ""), 4000);
}

// api calls a /v1 route with the session's token; it resolves with the
// decoded body or throws the contract error.
async function api(method, path, body) {
  const opts = { method, headers: { Authorization: "Bearer " + state.token } };
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const res = await fetch(path, opts);
  const date = Date.parse(res.headers.get("Date") || "");
  if (!isNaN(date) && Math.abs(date - Date.now()) > 1500) state.skewMs = date - Date.now();
  const data = await res.json().catch(() => ({}));
  if (res.status === 401) {
    signOut((data.error && data.error.message) || "signed out");
    throw new Error("unauthenticated");
  }
  if (!res.ok) {
    const e = data.error || { code: String(res.status), message: res.statusText };
    throw new Error(`${e.code}: ${e.message}`);
  }
  return data;
}

// ---- signing in and out ----

async function start() {
  $("login-form").addEventListener("submit", onLogin);
  $("signout").addEventListener("click", () => signOut(""));
  $("cleanup-dry").addEventListener("click", onCleanupDryRun);
  const code = new URLSearchParams(location.hash.slice(1)).get("code");
  let msg = "";
  if (code) {
    // Forget the code's URL at once: the history keeps only "/".
    history.replaceState(null, "", location.pathname);
    msg = await exchange(code);
  }
  state.token = sessionStorage.getItem(TOKEN) || "";
  state.role = sessionStorage.getItem(ROLE) || "";
  if (state.token) enter();
  else showLogin(msg);
  setInterval(tick, 1000);
  setInterval(() => state.token && scheduleRefresh(), 15000);
}

// exchange trades a one-time code for a console session; it returns why
// not, or "".
async function exchange(code) {
  const res = await fetch("/v1/console/session", {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ code }),
  });
  const data = await res.json().catch(() => ({}));
  if (!res.ok) return (data.error && data.error.message) || "the sign-in link did not work";
  sessionStorage.setItem(TOKEN, data.token);
  sessionStorage.setItem(ROLE, data.role);
  return "";
}

async function onLogin(ev) {
  ev.preventDefault();
  const tok = $("login-token").value.trim();
  if (!tok) return;
  $("login-token").value = "";
  state.token = tok;
  try {
    // hello answers with the token's role; the range accepts any protocol.
    const hello = await api("POST", "/v1/hello", { protocol: { min: 1, max: 1000000 }, client: "simlock-console" });
    state.role = hello.role;
    sessionStorage.setItem(TOKEN, tok);
    sessionStorage.setItem(ROLE, hello.role);
    enter();
  } catch (e) {
    if (state.token) signOut(e.message);
  }
}

function showLogin(msg) {
  $("main").hidden = true;
  $("signout").hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = msg;
  $("whoami").textContent = "";
}

function signOut(msg) {
  if (state.token.startsWith("slcs_")) {
    fetch("/v1/console/session", { method: "DELETE", headers: { Authorization: "Bearer " + state.token } }).catch(() => {});
  }
  if (state.stream) state.stream.abort();
  sessionStorage.removeItem(TOKEN);
  sessionStorage.removeItem(ROLE);
  Object.assign(state, { token: "", role: "", status: null, workers: null, stream: null, lastSeq: 0 });
  $("events").replaceChildren();
  setLive(false);
  showLogin(msg);
}

function enter() {
  $("login").hidden = true;
  $("main").hidden = false;
  $("signout").hidden = false;
  $("whoami").textContent = isOperator() ? "operator" : "agent";
  $("whoami").className = isOperator() ? "pill op" : "pill";
  document.body.classList.toggle("operator", isOperator());
  scheduleRefresh(0);
  follow();
}

// ---- status ----

// scheduleRefresh coalesces bursts of events into one status read.
function scheduleRefresh(delay = 150) {
  if (state.refreshTimer) return;
  state.refreshTimer = setTimeout(refresh, delay);
}

async function refresh() {
  state.refreshTimer = 0;
  if (state.refreshing) {
    state.refreshAgain = true;
    return;
  }
  state.refreshing = true;
  try {
    const st = await api("GET", "/v1/status");
    state.status = st;
    state.workers = st.workers || null;
    if (st.daemon.mode === "gateway" && isOperator()) {
      state.workers = (await api("POST", "/v1/ops/worker.list", {})).workers;
    }
    render();
  } catch (e) {
    if (state.token) toast(e.message, true);
  } finally {
    state.refreshing = false;
    if (state.refreshAgain) {
      state.refreshAgain = false;
      scheduleRefresh(0);
    }
  }
}

function render() {
  const st = state.status;
  const d = st.daemon;
  $("daemon").textContent = `${d.mode} · v${d.version} · ${d.health}` + (d.http ? ` · ${d.http}` : "");
  const gateway = d.mode === "gateway";
  $("tools-card").hidden = !isOperator() || gateway;
  const goldens = (st.goldens && st.goldens.devices) || [];
  renderCapacity(st.capacity, goldens.length);
  renderWorkers(gateway);
  renderLeases(st.leases || []);
  renderQueue(st.queue || []);
  renderDevices(st.devices || [], goldens, (st.goldens && st.goldens.notBuilt) || []);
  tick();
}

function bar(label, used, limit, text) {
  const pct = limit > 0 ? Math.min(100, (100 * used) / limit) : 0;
  const cls = pct >= 100 ? "fill full" : pct >= 75 ? "fill high" : "fill";
  const fillEl = el("span", { class: cls });
  fillEl.style.width = pct + "%"; // through the CSSOM: the page's CSP forbids style attributes
  return el("div", { class: "bar", "data-bar": label },
    el("span", { class: "label" }, label),
    el("span", { class: "track" }, fillEl),
    el("span", { class: "value" }, text || `${used} / ${limit}`));
}

// goldens is how many of the managed devices are clone provisioning's
// goldens: they take a managed slot each, so "managed" says so beside a
// device list that has fewer leasable devices than the count.
function renderCapacity(c, goldens) {
  $("strategy").textContent = c.strategy ? `(${c.strategy})` : "";
  const rows = [bar("running", c.running, c.maxRunning, `${c.running} / ${c.maxRunning}` + (c.reserved ? ` (+${c.reserved} reserved)` : "")),
    bar("managed", c.managed, c.maxManaged, `${c.managed} / ${c.maxManaged}` + (goldens ? ` (${goldens} golden)` : ""))];
  if (c.ramBudgetBytes > 0) {
    rows.push(bar("RAM", c.ramUsedBytes, c.ramBudgetBytes, `${fmtBytes(c.ramUsedBytes)} / ${fmtBytes(c.ramBudgetBytes)}`));
  }
  // A platform without limits of its own (0) draws from the shared ones.
  const share = (used, own, shared) => own > 0 ? [used, own, undefined] : [used, shared, `${used} (shared)`];
  for (const [p, pc] of Object.entries(c.platforms || {}).sort()) {
    rows.push(bar(`${p} running`, ...share(pc.running, pc.maxRunning, c.maxRunning)));
    rows.push(bar(`${p} managed`, ...share(pc.managed, pc.maxManaged, c.maxManaged)));
  }
  $("capacity").replaceChildren(...rows);
}

function actionButton(label, cls, question, run) {
  return el("button", {
    type: "button", class: cls,
    onclick: async () => {
      if (!(await confirmAction(question))) return;
      try {
        await run();
        toast(`${label}: done`);
      } catch (e) {
        toast(e.message, true);
      }
      scheduleRefresh(0);
    },
  }, label);
}

function renderWorkers(gateway) {
  $("workers-card").hidden = !gateway;
  if (!gateway) return;
  const rows = (state.workers || []).map((w) => {
    const cap = Object.entries(w.capacity || {}).sort()
      .map(([p, c]) => `${p} ${c.running}` + (c.maxRunning ? `/${c.maxRunning}` : "") + " running").join(", ");
    let op = null;
    if (isOperator()) {
      op = w.drained
        ? actionButton("Undrain", "act-undrain", `Undrain worker ${w.id}? It will receive new leases again.`,
          () => api("POST", "/v1/ops/worker.undrain", { id: w.id }))
        : actionButton("Drain", "act-drain danger", `Drain worker ${w.id}? It gets no new leases; its leases stay.`,
          () => api("POST", "/v1/ops/worker.drain", { id: w.id }));
    }
    return el("tr", { "data-worker": w.id, class: w.drained ? "drained" : "" },
      el("td", {}, el("b", {}, w.id), w.label ? el("span", { class: "muted" }, " " + w.label) : null),
      el("td", {}, el("span", { class: "pill state-" + w.state }, w.state)),
      el("td", { class: "drain" }, w.drained ? el("span", { class: "pill warn" }, "drained") : "accepting"),
      el("td", {}, cap || "—"),
      el("td", {}, w.leases),
      el("td", {}, w.queueDepth),
      el("td", {}, w.version || "—"),
      el("td", { class: "since", "data-at": w.lastSeenAt }),
      el("td", { class: "op" }, op));
  });
  fill($("workers").tBodies[0], rows, "no worker has joined", 9);
}

function renderLeases(leases) {
  $("lease-count").textContent = `(${leases.length})`;
  const rows = leases.map((l) => {
    const dev = l.device ? `${l.device.model} · ${l.deviceId}` : l.deviceId;
    const op = isOperator()
      ? actionButton("Release", "act-release danger", `Release ${l.leaseId} held by ${l.requesterId}? Its holder loses the device.`,
        () => api("DELETE", "/v1/leases/" + encodeURIComponent(l.leaseId)))
      : null;
    return el("tr", { "data-lease": l.leaseId },
      el("td", { class: "mono" }, l.leaseId),
      el("td", {}, l.requesterId),
      el("td", {}, dev, l.worker ? el("span", { class: "muted" }, ` on ${l.worker.label || l.worker.id}`) : null),
      el("td", { class: "since", "data-at": l.grantedAt }),
      el("td", { class: "countdown", "data-expires": l.expiresAt, "data-ttl": l.ttlMs }),
      el("td", { class: "op" }, op));
  });
  fill($("leases").tBodies[0], rows, "no leases", 6);
}

function renderQueue(queue) {
  $("queue-count").textContent = `(${queue.length} waiting)`;
  const rows = queue.map((q) =>
    el("tr", { "data-queued": q.requesterId },
      el("td", {}, q.position),
      el("td", {}, q.requesterId),
      el("td", {}, [q.platform, q.model, q.osVersion].filter(Boolean).join(" ")),
      el("td", {}, q.phase),
      el("td", { class: "since", "data-at": q.enqueuedAt })));
  fill($("queue").tBodies[0], rows, "nobody is waiting", 5);
}

// A device's live state is under runtime: lifecycle is the registry state,
// lease the id of the lease holding it (null when idle).
const lifecycle = (d) => (d.runtime && d.runtime.lifecycle) || "";

// shortID drops the reverse-DNS prefix of a device type or runtime
// identifier (com.apple.CoreSimulator.SimDeviceType.iPhone-16 reads
// iPhone-16); the whole one is the cell's title.
const shortID = (id) => (id || "").replace(/^com\.apple\.CoreSimulator\.Sim(DeviceType|Runtime)\./, "");

// Goldens (clone provisioning's templates) are listed with the devices in
// a state of their own: they serve no lease, but each takes a managed slot,
// so the page adds up to the managed count. Their own state (ready,
// building, reclaiming, stuck) is shown beside it.
function renderDevices(devices, goldens, notBuilt) {
  const all = devices.map((d) => ({ platform: d.platform, state: lifecycle(d) }))
    .concat(goldens.map((g) => ({ platform: g.platform, state: "golden" })));
  const states = [...new Set(all.map((d) => d.state))].sort();
  const platforms = [...new Set(all.map((d) => d.platform))].sort();
  const count = (p, s) => all.filter((d) => d.platform === p && d.state === s).length;
  $("device-count").textContent = goldens.length ? `(${devices.length} + ${goldens.length} golden)` : `(${devices.length})`;
  const summary = el("table", { class: "summary" },
    el("thead", {}, el("tr", {}, el("th", {}, "platform"), ...states.map((s) => el("th", {}, s)))),
    el("tbody", {}, ...platforms.map((p) =>
      el("tr", {}, el("td", {}, p), ...states.map((s) => el("td", { class: count(p, s) ? "" : "muted", "data-count": `${p}/${s}` }, count(p, s)))))));
  const refused = notBuilt.map((n) =>
    el("p", { class: "muted", "data-not-built": `${n.platform}/${n.modelId}/${n.runtimeId}` },
      `golden ${n.platform} ${n.modelId} ${n.runtimeId} not built: ${n.reason}` + (n.retrying ? " (retrying)" : "")));
  $("device-summary").replaceChildren(all.length ? summary : el("p", { class: "muted" }, "no devices yet: they are created on demand"), ...refused);
  const goldenRows = goldens.map((g) =>
    el("tr", { "data-golden": g.handle, "data-state": "golden" },
      el("td", { class: "mono" }, g.handle),
      el("td", {}, g.platform),
      el("td", { title: g.modelId }, shortID(g.modelId)),
      el("td", { title: g.runtimeId }, shortID(g.runtimeId)),
      el("td", {}, el("span", { class: "pill state-golden" }, "golden"),
        el("span", { class: "muted golden-state" }, " " + g.state + (g.error ? `: ${g.error}` : ""))),
      el("td", { class: "since" }, g.retryAt ? "retry at " + new Date(g.retryAt).toLocaleTimeString() : "—"),
      el("td", {}, "")));
  const rows = devices.map((d) =>
    el("tr", { "data-device": d.id, "data-state": lifecycle(d) },
      el("td", { class: "mono" }, d.id, d.workerId ? el("span", { class: "muted" }, ` @${d.workerId}`) : null),
      el("td", {}, d.platform),
      el("td", {}, d.model),
      el("td", {}, d.osVersion),
      el("td", {}, el("span", { class: "pill state-" + lifecycle(d) }, lifecycle(d))),
      el("td", { class: "since", "data-at": d.stateSinceAt }),
      el("td", { class: "mono" }, (d.runtime && d.runtime.lease) || "")));
  fill($("devices").tBodies[0], rows.concat(goldenRows), "no devices", 7);
}

// tick moves every clock on the page: ages, waits and countdowns.
function tick() {
  const t = now();
  for (const c of document.querySelectorAll("[data-at]")) {
    const at = Date.parse(c.dataset.at);
    c.textContent = isNaN(at) || at <= 0 ? "—" : fmtDur(t - at);
  }
  for (const c of document.querySelectorAll("[data-expires]")) {
    const left = Date.parse(c.dataset.expires) - t;
    c.textContent = left > 0 ? fmtDur(left) : "expiring";
    c.classList.toggle("soon", left < 60000);
  }
}

// ---- operator actions ----

function confirmAction(question) {
  const dlg = $("confirm");
  $("confirm-text").textContent = question;
  return new Promise((resolve) => {
    dlg.addEventListener("close", () => resolve(dlg.returnValue === "ok"), { once: true });
    dlg.returnValue = "";
    dlg.showModal();
  });
}

async function onCleanupDryRun() {
  if (!(await confirmAction("Run the cleanup rules as a dry run? Nothing is changed; the result lists what would be."))) return;
  try {
    const out = await api("POST", "/v1/cleanup", { dryRun: true });
    const items = (out.actions || []).map((a) =>
      el("li", {}, `${a.rule}: ${a.action} ${a.deviceId} (${a.reason})` + (a.skipped ? ` skipped: ${a.skipped}` : "")));
    $("cleanup-result").replaceChildren(items.length ? el("ul", {}, ...items) : el("p", { class: "muted" }, "dry run: nothing to clean up"));
  } catch (e) {
    toast(e.message, true);
  }
}

// ---- live events ----

function setLive(on) {
  $("live").textContent = on ? "live" : "offline";
  $("live").className = on ? "pill on" : "pill off";
}

// follow reads the event stream until signed out, reconnecting after
// the last event seen so nothing is shown twice.
async function follow() {
  if (state.stream) state.stream.abort();
  const ctl = new AbortController();
  state.stream = ctl;
  while (!ctl.signal.aborted) {
    try {
      const q = state.lastSeq ? "?since=" + state.lastSeq : "";
      const res = await fetch("/v1/events" + q, {
        headers: { Authorization: "Bearer " + state.token, Accept: "text/event-stream" }, signal: ctl.signal,
      });
      if (res.status === 401) {
        signOut("signed out");
        return;
      }
      if (!res.ok) throw new Error("events: " + res.status);
      setLive(true);
      scheduleRefresh(0);
      await readSSE(res.body, onMessage);
    } catch (e) {
      if (ctl.signal.aborted) return;
    }
    setLive(false);
    await new Promise((r) => setTimeout(r, 2000));
  }
}

async function readSSE(body, onMsg) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value;
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      const msg = { event: "message", id: "", data: "" };
      for (const line of block.split("\n")) {
        if (line.startsWith(":")) continue;
        const j = line.indexOf(":");
        const k = j < 0 ? line : line.slice(0, j);
        const v = j < 0 ? "" : line.slice(j + 1).replace(/^ /, "");
        if (k === "data") msg.data += (msg.data ? "\n" : "") + v;
        else if (k === "event" || k === "id") msg[k] = v;
      }
      if (msg.data) onMsg(msg);
    }
  }
}

function onMessage(msg) {
  if (msg.id) state.lastSeq = Number(msg.id) || state.lastSeq;
  let data;
  try {
    data = JSON.parse(msg.data);
  } catch {
    return;
  }
  if (msg.event === "gap") {
    addEvent({ type: "gap", at: new Date(now()).toISOString(), reason: `events ${data.fromSeq}-${data.toSeq} were missed` });
  } else {
    addEvent(data);
  }
  scheduleRefresh();
}

function addEvent(e) {
  const at = new Date(e.at);
  const who = [e.workerId && "@" + e.workerId, e.leaseId, e.deviceId, e.requesterId].filter(Boolean).join(" ");
  const item = el("li", { class: "ev-" + e.type.split(".")[0], "data-type": e.type },
    el("time", { datetime: e.at }, isNaN(at) ? "" : at.toLocaleTimeString()),
    el("b", {}, e.type),
    el("span", {}, who),
    e.reason ? el("span", { class: "muted" }, e.reason) : null);
  const list = $("events");
  list.prepend(item);
  while (list.children.length > MAX_EVENTS) list.lastChild.remove();
}

start();
