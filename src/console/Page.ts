/**
 * The console's page: one HTML document the daemon generates, its style and script
 * inline and allowed by their SHA-256 hashes in a Content-Security-Policy that
 * forbids everything else (`default-src 'none'`): no script, font, style or image
 * from anywhere, and requests only to the daemon's own origin. The charts are the
 * report's (`CHART_LIBRARY` of src/report/ChartScript.ts: time and value ticks,
 * point reduction); numbers are drawn from exact decimal strings only at the end.
 *
 * The page reads the API once, then follows the event stream (read with `fetch`, so
 * that the token travels in the Authorization header, which EventSource cannot
 * send) and reads again only what an event changed, at most every few seconds. The
 * token is asked for when an answer is 401 or a control is used, and kept in
 * sessionStorage: for this browser tab's session only.
 */
import { createHash } from "node:crypto"
import { CHART_LIBRARY } from "../report/ChartScript.js"
import type { ConsolePage } from "./Api.js"

const STYLE = `
:root { color-scheme: light dark; --fg: #1d232b; --muted: #5c6773; --line: #d5dae0; --card: #ffffff; --bg: #f2f4f7; --up: #0b7a3e; --down: #b42318; --warn: #a15c00; --accent: #2457c5; }
@media (prefers-color-scheme: dark) { :root { --fg: #e3e7ec; --muted: #97a2ae; --line: #38414b; --card: #1b2027; --bg: #12161b; --up: #4cc38a; --down: #ff7b72; --warn: #e3b341; --accent: #79a6ff; } }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); background: var(--bg); }
header.top { display: flex; flex-wrap: wrap; gap: .5rem 1rem; align-items: center; padding: .6rem 1rem; background: var(--card); border-bottom: 1px solid var(--line); position: sticky; top: 0; z-index: 2; }
header.top h1 { font-size: 1.1rem; margin: 0; }
.pill { display: inline-block; padding: .05rem .55rem; border-radius: 1rem; border: 1px solid currentColor; font-size: .8rem; white-space: nowrap; }
.ready, .running { color: var(--up); } .degraded, .paused, .stopping { color: var(--down); } .starting, .entries-stopped, .disabled { color: var(--warn); }
#connection { color: var(--muted); font-size: .85rem; }
.spacer { flex: 1; }
main { display: grid; gap: 1rem; padding: 1rem; grid-template-columns: repeat(auto-fill, minmax(min(100%, 36rem), 1fr)); }
section, article { background: var(--card); border: 1px solid var(--line); border-radius: .5rem; padding: .75rem 1rem; min-width: 0; }
h2 { font-size: 1rem; margin: 0 0 .4rem; }
h3 { font-size: .85rem; margin: .8rem 0 .2rem; color: var(--muted); font-weight: 600; }
.wide { grid-column: 1 / -1; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; }
th, td { padding: .15rem .4rem; text-align: left; border-bottom: 1px solid var(--line); white-space: nowrap; }
th { color: var(--muted); font-weight: 600; font-size: .8rem; }
.num { text-align: right; font-variant-numeric: tabular-nums; }
.buy { color: var(--up); } .sell { color: var(--down); }
.pos { color: var(--up); } .neg { color: var(--down); }
.muted { color: var(--muted); }
.figures { display: grid; grid-template-columns: repeat(auto-fit, minmax(7rem, 1fr)); gap: .3rem .8rem; margin: .4rem 0; }
.figures div { display: flex; flex-direction: column; }
.figures span:first-child { color: var(--muted); font-size: .75rem; }
.figures span:last-child { font-variant-numeric: tabular-nums; font-size: 1rem; }
.reason { color: var(--muted); margin-left: .4rem; }
.controls { display: flex; flex-wrap: wrap; gap: .4rem; margin-top: .6rem; }
button { font: inherit; padding: .3rem .7rem; border-radius: .35rem; border: 1px solid var(--line); background: var(--bg); color: var(--fg); cursor: pointer; }
button:hover { border-color: var(--accent); }
svg.pnl { width: 100%; height: auto; display: block; }
svg.pnl .grid { stroke: var(--line); stroke-width: 1; }
svg.pnl .zero { stroke: var(--muted); stroke-dasharray: 3 3; }
svg.pnl .tick { fill: var(--muted); font-size: 11px; font-variant-numeric: tabular-nums; }
svg.pnl path.line { fill: none; stroke: var(--accent); stroke-width: 1.5; }
#events { list-style: none; margin: 0; padding: 0; max-height: 28rem; overflow-y: auto; }
#events li { display: grid; grid-template-columns: 6.5rem 7rem 1fr; gap: .5rem; padding: .15rem 0; border-bottom: 1px solid var(--line); }
#events time { font-variant-numeric: tabular-nums; color: var(--muted); }
#reasons { margin: .2rem 0; padding-left: 1.2rem; }
#notice { min-height: 1.2em; color: var(--muted); }
#token-panel { display: none; gap: .4rem; align-items: center; flex-wrap: wrap; }
#token-panel.open { display: flex; }
#token-panel input { font: inherit; padding: .3rem; min-width: 16rem; border: 1px solid var(--line); border-radius: .35rem; background: var(--bg); color: var(--fg); }
@media (max-width: 40rem) { main { padding: .5rem; gap: .5rem; } #events li { grid-template-columns: 5.5rem 1fr; } #events li span:last-child { grid-column: 1 / -1; } }
`

const APP = String.raw`
(function () {
  "use strict";
  var TOKEN_KEY = "svcbot.console.token";
  var EVENTS_KEPT = 200, FILLS_SHOWN = 8;
  var state = { instances: [], promotions: {}, token: sessionStorage.getItem(TOKEN_KEY) };
  var $ = function (id) { return document.getElementById(id); };
  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    if (attrs) Object.keys(attrs).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function localTime(iso) { return new Date(iso).toLocaleTimeString(); }
  function localDateTime(iso) { return new Date(iso).toLocaleString(); }
  function signClass(amount) { return /^-/.test(amount) ? "neg" : /^0(\.0*)?$/.test(amount) ? "" : "pos"; }
  function notice(text) { $("notice").textContent = text; }

  function headers() { return state.token ? { Authorization: "Bearer " + state.token } : {}; }
  function api(path, method) {
    return fetch(path, { method: method || "GET", headers: headers(), cache: "no-store" }).then(function (res) {
      return res.json().then(function (body) {
        if (res.status === 401) askToken("The daemon wants its health token.");
        return { status: res.status, body: body };
      });
    });
  }

  // The token: asked for once, kept for this tab's session only.
  var afterToken = null;
  function askToken(why) {
    $("token-why").textContent = why;
    $("token-panel").classList.add("open");
    $("token-input").focus();
  }
  function saveToken() {
    var value = $("token-input").value.trim();
    if (!value) return;
    state.token = value;
    sessionStorage.setItem(TOKEN_KEY, value);
    $("token-input").value = "";
    $("token-panel").classList.remove("open");
    var next = afterToken; afterToken = null;
    if (next) next(); else start();
  }
  $("token-save").addEventListener("click", saveToken);
  $("token-input").addEventListener("keydown", function (e) { if (e.key === "Enter") saveToken(); });
  $("token-forget").addEventListener("click", function () { sessionStorage.removeItem(TOKEN_KEY); state.token = null; notice("token forgotten"); });

  // Instances: one card each, built once, filled on every read.
  function card(id) {
    var existing = document.querySelector('article.instance[data-instance="' + CSS.escape(id) + '"]');
    if (existing) return existing;
    var art = el("article", { "class": "instance", "data-instance": id });
    var head = el("h2"); head.appendChild(el("span", { "class": "id" }, id)); head.appendChild(document.createTextNode(" "));
    head.appendChild(el("span", { "class": "pill state" })); head.appendChild(el("span", { "class": "reason" }));
    art.appendChild(head);
    art.appendChild(el("div", { "class": "meta muted" }));
    art.appendChild(el("div", { "class": "promotion muted" }));
    art.appendChild(el("div", { "class": "figures" }));
    art.appendChild(el("div", { "class": "book muted" }));
    var chart = document.createElementNS("http://www.w3.org/2000/svg", "svg");
    chart.setAttribute("class", "pnl"); chart.setAttribute("viewBox", "0 0 600 170"); chart.setAttribute("role", "img");
    chart.setAttribute("aria-label", "net PnL of " + id + " over the run");
    art.appendChild(el("h3", null, "Net PnL over the run")); art.appendChild(chart);
    art.appendChild(el("h3", null, "Open orders")); var o = el("div", { "class": "scroll orders" }); art.appendChild(o);
    art.appendChild(el("h3", null, "Last fills")); var f = el("div", { "class": "scroll fills" }); art.appendChild(f);
    var controls = el("div", { "class": "controls" });
    [["pause", "Pause"], ["resume", "Resume"], ["stop-entries", "Stop entries"], ["cancel-all", "Cancel all"]].forEach(function (c) {
      var b = el("button", { type: "button", "data-action": c[0] }, c[1]);
      b.addEventListener("click", function () { act(id, c[0]); });
      controls.appendChild(b);
    });
    art.appendChild(controls);
    $("instances").appendChild(art);
    return art;
  }

  function figure(label, value, cls) {
    var d = el("div"); d.appendChild(el("span", null, label));
    d.appendChild(el("span", { "class": cls || "" }, value)); return d;
  }

  function renderInstance(row) {
    var art = card(row.id);
    art.setAttribute("data-state", row.state);
    var pill = art.querySelector(".state"); pill.textContent = row.state; pill.className = "pill state " + row.state;
    art.querySelector(".reason").textContent = row.reason || "";
    art.querySelector(".meta").textContent = row.strategy + " on " + row.symbol;
    var figs = art.querySelector(".figures"); figs.textContent = "";
    figs.appendChild(figure("realised", row.pnl.realised, signClass(row.pnl.realised)));
    figs.appendChild(figure("unrealised", row.pnl.unrealised, signClass(row.pnl.unrealised)));
    figs.appendChild(figure("net", row.pnl.net, signClass(row.pnl.net)));
    figs.appendChild(figure("fills", row.fills));
    figs.appendChild(figure("open orders", row.openOrders));
    var book = Object.keys(row.book).map(function (a) { return row.book[a] + " " + a; }).join(", ");
    art.querySelector(".book").textContent = book ? "book: " + book : "book: nothing traded yet";
    renderPromotion(row.id);
  }

  function renderPromotion(id) {
    var p = state.promotions[id], art = card(id);
    if (!p) return;
    var next = p.nextStage === null ? "" : p.nextGate.length === 0 ? "; " + p.nextStage + " gate passes" :
      "; for " + p.nextStage + ": " + p.nextGate.slice(0, 2).map(function (g) { return g.gate + " needs " + g.required + " (has " + g.actual + ")"; }).join(", ") +
      (p.nextGate.length > 2 ? " and " + (p.nextGate.length - 2) + " more gates" : "");
    art.querySelector(".promotion").textContent = "stage " + p.stage + ", " + p.evidenceDays + " evidence days, " + p.fillsCompared + " fills compared, " + p.mismatches + " mismatches" + next;
  }

  function table(holder, head, rows, numeric) {
    holder.textContent = "";
    if (rows.length === 0) { holder.appendChild(el("div", { "class": "muted" }, "none")); return; }
    var t = el("table"), h = el("tr");
    head.forEach(function (name, i) { h.appendChild(el("th", { "class": numeric[i] ? "num" : "" }, name)); });
    var thead = el("thead"); thead.appendChild(h); t.appendChild(thead);
    var body = el("tbody");
    rows.forEach(function (cells) {
      var tr = el("tr");
      cells.forEach(function (cell, i) {
        var td = el("td", { "class": (numeric[i] ? "num " : "") + (cell && cell.cls ? cell.cls : "") }, cell && typeof cell === "object" ? cell.text : cell);
        tr.appendChild(td);
      });
      body.appendChild(tr);
    });
    t.appendChild(body); holder.appendChild(t);
  }

  function renderOrders(orders) {
    var by = {};
    orders.forEach(function (o) { (by[o.strategy] = by[o.strategy] || []).push(o); });
    state.instances.forEach(function (row) {
      table(card(row.id).querySelector(".orders"), ["side", "type", "qty", "price", "filled", "state", "since"],
        (by[row.id] || []).map(function (o) {
          return [{ text: o.side, cls: o.side }, o.type, o.baseQty || (o.quoteOrderQty + " quote"), o.limitPrice || "market", o.filledBaseQty, o.state, localTime(o.createdAt)];
        }), [false, false, true, true, true, false, false]);
    });
  }

  var fillsBy = {};
  function renderFills(id) {
    table(card(id).querySelector(".fills"), ["time", "side", "price", "qty", "fee"],
      (fillsBy[id] || []).slice(0, FILLS_SHOWN).map(function (f) {
        return [localTime(f.time), { text: f.side, cls: f.side }, f.price, f.baseQty, f.fee + " " + f.feeAsset];
      }), [false, false, true, true, true]);
    var art = card(id); art.setAttribute("data-fills-shown", String((fillsBy[id] || []).length));
  }

  // The PnL chart, drawn with the report's tick and point-reduction functions.
  var W = 600, H = 170, PAD = { left: 70, right: 10, top: 8, bottom: 22 };
  function drawPnl(id, points) {
    var svg = card(id).querySelector("svg.pnl");
    var plotW = W - PAD.left - PAD.right, plotH = H - PAD.top - PAD.bottom;
    if (points.length === 0) {
      svg.innerHTML = '<text class="tick" x="' + (W / 2) + '" y="' + (H / 2) + '" text-anchor="middle">no fills yet</text>';
      svg.setAttribute("data-points", "0");
      return;
    }
    var xs = points.map(function (p) { return Date.parse(p.time); });
    var ys = points.map(function (p) { return Number(p.net); });
    var from = xs[0], to = Math.max(xs[xs.length - 1], from + 60000);
    var idx = SvcChart.envelope(xs, ys, from, to, plotW);
    var lo = 0, hi = 0;
    idx.forEach(function (i) { if (ys[i] < lo) lo = ys[i]; if (ys[i] > hi) hi = ys[i]; });
    var vt = SvcChart.valueTicks(lo, hi, 4);
    if (vt.ticks.length) { lo = Math.min(lo, vt.ticks[0].value); hi = Math.max(hi, vt.ticks[vt.ticks.length - 1].value); }
    if (!(hi > lo)) { lo -= 1; hi += 1; }
    var sx = function (x) { return PAD.left + ((x - from) / (to - from)) * plotW; };
    var sy = function (y) { return PAD.top + (1 - (y - lo) / (hi - lo)) * plotH; };
    // The report labels ticks in UTC; shifted by the browser's offset, they read in local time.
    var offset = -new Date(to).getTimezoneOffset() * 60000;
    var tt = SvcChart.calendarTicks(from + offset, to + offset, 6);
    var parts = [];
    vt.ticks.forEach(function (t) {
      var y = sy(t.value).toFixed(1);
      parts.push('<line class="' + (t.value === 0 ? "zero" : "grid") + '" x1="' + PAD.left + '" x2="' + (W - PAD.right) + '" y1="' + y + '" y2="' + y + '"/>');
      parts.push('<text class="tick value-tick" x="' + (PAD.left - 6) + '" y="' + y + '" text-anchor="end" dominant-baseline="middle">' + t.label + "</text>");
    });
    tt.ticks.forEach(function (t) {
      var x = sx(t.time - offset).toFixed(1);
      parts.push('<line class="grid" x1="' + x + '" x2="' + x + '" y1="' + PAD.top + '" y2="' + (PAD.top + plotH) + '"/>');
      parts.push('<text class="tick time-tick" x="' + x + '" y="' + (H - 6) + '" text-anchor="middle">' + t.label + "</text>");
    });
    var d = "";
    idx.forEach(function (i, k) { d += (k === 0 ? "M" : "L") + sx(xs[i]).toFixed(1) + " " + sy(ys[i]).toFixed(1); });
    parts.push('<path class="line" d="' + d + '"/>');
    svg.innerHTML = parts.join("");
    svg.setAttribute("data-points", String(points.length));
  }

  function renderHealth(h) {
    var s = $("status"); s.textContent = h.status; s.className = "pill " + h.status;
    var list = $("reasons"); list.textContent = "";
    (h.reasons || []).forEach(function (r) { list.appendChild(el("li", null, r)); });
    if (!h.reasons || h.reasons.length === 0) list.appendChild(el("li", { "class": "muted" }, "no reasons: trading as configured"));
    if (h.budget) renderBudget(h.budget);
  }
  function renderBudget(b) {
    var parts = [
      "weight " + b.usedWeight1m + (b.weightLimit1m === null ? "" : " of " + b.weightLimit1m) + " per minute",
      "orders " + b.ordersUsed10s + (b.ordersLimit10s === null ? "" : " of " + b.ordersLimit10s) + " per 10 s",
      "orders " + b.ordersUsed1d + (b.ordersLimit1d === null ? "" : " of " + b.ordersLimit1d) + " today",
      b.waits + " budget waits, " + b.rateLimited + " rate limited"
    ];
    $("budget").textContent = parts.join(" · ");
  }

  // The live event list, newest first.
  function listEvent(type, text, at) {
    var li = el("li", { "data-type": type });
    li.appendChild(el("time", { datetime: at }, localTime(at)));
    li.appendChild(el("span", { "class": "pill " + type }, type));
    li.appendChild(el("span", null, text));
    var list = $("events");
    list.insertBefore(li, list.firstChild);
    while (list.children.length > EVENTS_KEPT) list.removeChild(list.lastChild);
  }

  // Reads again what events changed, each at most every few seconds.
  var timers = {};
  function later(key, ms, work) {
    if (timers[key]) return;
    timers[key] = setTimeout(function () { timers[key] = null; work(); }, ms);
  }

  function loadInstances() {
    return api("/api/v1/instances").then(function (r) {
      if (r.status !== 200) return false;
      state.instances = r.body.instances;
      r.body.instances.forEach(renderInstance);
      $("instances").setAttribute("data-count", String(r.body.instances.length));
      return true;
    });
  }
  function loadOrders() { return api("/api/v1/orders?open=true&limit=1000").then(function (r) { if (r.status === 200) renderOrders(r.body.orders); }); }
  function loadFills(id) {
    return api("/api/v1/fills?instance=" + encodeURIComponent(id) + "&limit=" + FILLS_SHOWN).then(function (r) {
      if (r.status !== 200) return;
      fillsBy[id] = r.body.fills; renderFills(id);
    });
  }
  function loadPnl(id) { return api("/api/v1/pnl?instance=" + encodeURIComponent(id)).then(function (r) { if (r.status === 200) drawPnl(id, r.body.points); }); }
  function loadHealth() { return api("/api/v1/health").then(function (r) { if (r.status === 200) renderHealth(r.body); }); }
  function loadPromotions() {
    return api("/api/v1/promotions").then(function (r) {
      if (r.status !== 200) return;
      r.body.promotions.forEach(function (p) { state.promotions[p.instance] = p; renderPromotion(p.instance); });
    });
  }
  // A read that fails (the daemon busy or restarting, the network) is tried again a few seconds
  // later: the page never stays half read.
  function loadAll() {
    return loadInstances().then(function (ok) {
      if (!ok) throw new Error("instances unreadable");
      return Promise.all([loadOrders(), loadHealth(), loadPromotions()].concat(state.instances.map(function (row) { return Promise.all([loadFills(row.id), loadPnl(row.id)]); })))
        .then(function () { document.body.setAttribute("data-loaded", "true"); });
    }).catch(function (error) {
      // Waiting for the token: saving it reads again.
      if ($("token-panel").classList.contains("open")) return;
      notice("reading the daemon's state failed (" + error.message + "), trying again");
      later("loadAll", 3000, loadAll);
    });
  }

  function onEvent(type, data) {
    if (type === "fill") {
      if (data.strategy) {
        fillsBy[data.strategy] = [data].concat(fillsBy[data.strategy] || []).slice(0, FILLS_SHOWN);
        renderFills(data.strategy);
        later("pnl:" + data.strategy, 5000, function () { loadPnl(data.strategy); });
      }
      listEvent("fill", (data.strategy || "(external)") + " " + data.side + " " + data.baseQty + " " + data.symbol + " @ " + data.price, data.time);
      later("instances", 2000, loadInstances);
    } else if (type === "order") {
      if (data.state === "refused" || data.state === "rejected" || data.state === "lost" || data.state === "unknown") {
        listEvent(data.state === "refused" || data.state === "rejected" ? "refusal" : data.state, (data.strategy || "(external)") + " " + (data.tag || data.clientOrderId || "") + " " + data.state + (data.code ? " (" + data.code + ")" : ""), data.at);
      }
      later("orders", 2000, loadOrders);
      later("instances", 2000, loadInstances);
    } else if (type === "instance") {
      listEvent("instance", data.id + " " + data.state + (data.reason ? ": " + data.reason : ""), data.at);
      loadInstances();
    } else if (type === "health") {
      listEvent("health", data.status + (data.reasons.length ? ": " + data.reasons.join("; ") : ""), data.at);
      renderHealth(data);
    } else if (type === "budget") {
      renderBudget(data);
    } else if (type === "action") {
      listEvent("action", data.action + (data.instance ? " " + data.instance : "") + ": " + data.outcome, data.at);
    }
  }

  // The event stream, read with fetch so the token can travel in a header.
  var retryMs = 1000, streaming = false, reconnecting = false;
  function connect() {
    if (streaming) return;
    streaming = true;
    $("connection").textContent = "connecting";
    fetch("/api/v1/events", { headers: headers(), cache: "no-store" }).then(function (res) {
      if (res.status === 401) { askToken("The daemon wants its health token."); throw new Error("unauthorized"); }
      if (res.status !== 200 || !res.body) throw new Error("status " + res.status);
      $("connection").textContent = "live";
      document.body.setAttribute("data-stream", "open");
      retryMs = 1000;
      // What happened while the stream was down is read afresh.
      if (reconnecting) loadAll();
      reconnecting = true;
      var reader = res.body.getReader(), decoder = new TextDecoder(), buffer = "";
      function pump() {
        return reader.read().then(function (chunk) {
          if (chunk.done) throw new Error("stream ended");
          buffer += decoder.decode(chunk.value, { stream: true });
          var cut;
          while ((cut = buffer.indexOf("\n\n")) >= 0) {
            var frame = buffer.slice(0, cut); buffer = buffer.slice(cut + 2);
            var type = "message", data = "";
            frame.split("\n").forEach(function (line) {
              if (line.indexOf("event: ") === 0) type = line.slice(7);
              else if (line.indexOf("data: ") === 0) data += line.slice(6);
            });
            if (data) onEvent(type, JSON.parse(data));
          }
          return pump();
        });
      }
      return pump();
    }).catch(function (error) {
      $("connection").textContent = "disconnected (" + error.message + "), retrying";
      document.body.setAttribute("data-stream", "closed");
    }).then(function () {
      streaming = false;
      if (String($("connection").textContent).indexOf("unauthorized") >= 0) return;
      setTimeout(connect, retryMs);
      retryMs = Math.min(retryMs * 2, 30000);
    });
  }

  function act(id, action) {
    var send = function () {
      notice(action + " " + id + "...");
      api("/api/v1/instances/" + encodeURIComponent(id) + "/" + action, "POST").then(function (r) {
        if (r.status === 401) { afterToken = send; return; }
        notice(r.status === 200 ? action + " " + id + ": " + r.body.outcome : action + " " + id + " refused: " + r.body.error.message);
        loadInstances();
      });
    };
    if (!state.token) { afterToken = send; askToken("Controls need the daemon's health token."); return; }
    send();
  }
  $("ack-lost").addEventListener("click", function () {
    var send = function () {
      fetch("/api/v1/lost/ack", { method: "POST", headers: Object.assign({ "content-type": "application/json" }, headers()), body: JSON.stringify({ all: true }), cache: "no-store" })
        .then(function (res) { return res.json().then(function (body) { return { status: res.status, body: body }; }); })
        .then(function (r) {
          if (r.status === 401) { afterToken = send; askToken("The daemon wants its health token."); return; }
          notice(r.status === 200 ? "lost orders: " + r.body.outcome : "acknowledging refused: " + r.body.error.message);
        });
    };
    if (!state.token) { afterToken = send; askToken("Controls need the daemon's health token."); return; }
    send();
  });

  // Whether the daemon wants a token and takes this tab's: asked without a 401, which a browser reports as an error.
  function start() {
    api("/api/v1/session").then(function (r) {
      if (r.body.tokenConfigured && !r.body.authorized) {
        if (state.token) { sessionStorage.removeItem(TOKEN_KEY); state.token = null; askToken("That token was refused; enter the daemon's health token."); }
        else askToken("The daemon wants its health token to show its state.");
        return;
      }
      loadAll();
      connect();
    });
  }
  start();
})();
`

const BODY = `<header class="top">
<h1>svcbot</h1><span id="status" class="pill starting">loading</span><span id="connection">connecting</span>
<span class="spacer"></span>
<div id="token-panel"><span id="token-why"></span><input id="token-input" type="password" autocomplete="off" aria-label="health token" placeholder="health token"><button id="token-save" type="button">Use token</button></div>
<button id="token-forget" type="button">Forget token</button>
</header>
<main>
<section class="wide" id="health-panel"><h2>Health</h2><ul id="reasons"></ul><div id="budget" class="muted"></div>
<div class="controls"><button id="ack-lost" type="button">Acknowledge lost orders</button></div><div id="notice" role="status"></div></section>
<div id="instances" class="wide" data-count="0"></div>
<section class="wide"><h2>Events</h2><ol id="events"></ol></section>
</main>`

const hash = (text: string): string => `'sha256-${createHash("sha256").update(text, "utf8").digest("base64")}'`

/** The page and its policy: built once, the same for every request. */
export const consolePage = (): ConsolePage => {
  const script = `${CHART_LIBRARY}${APP}`
  // The instance cards lay out in the main grid: the holder spans it and lays them out itself.
  const style = `${STYLE}#instances { display: grid; gap: 1rem; grid-template-columns: repeat(auto-fill, minmax(min(100%, 36rem), 1fr)); }`
  return {
    html: `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer"><title>svcbot console</title><style>${style}</style></head>
<body>${BODY}<script>${script}</script></body></html>`,
    csp: [
      "default-src 'none'",
      `script-src ${hash(script)}`,
      `style-src ${hash(style)}`,
      "connect-src 'self'",
      "img-src 'none'",
      "base-uri 'none'",
      "form-action 'none'",
      "frame-ancestors 'none'"
    ].join("; ")
  }
}
