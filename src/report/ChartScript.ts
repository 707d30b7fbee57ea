/**
 * The report's script, inlined into the page (the report must open offline, so nothing is
 * loaded). Written as plain browser JavaScript in strings so the page runs exactly this text;
 * `CHART_LIBRARY` holds the pure parts (tick choice, point reduction, marker thinning), which
 * the unit tests evaluate in Node, and `CHART_APP` draws the charts and the trade table from the
 * page's JSON and handles zoom, pan and sorting.
 */

/** Defines `SvcChart`: functions of numbers only, no DOM. */
export const CHART_LIBRARY = String.raw`
var SvcChart = (function () {
  "use strict";
  var MINUTE = 60000, HOUR = 3600000, DAY = 86400000;
  var MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
  // Candidate steps of a time axis, finest first. Months and years are calendar steps; their
  // ms is only an estimate used to choose how many fit.
  var TIME_STEPS = [
    { unit: "minute", n: 1 }, { unit: "minute", n: 2 }, { unit: "minute", n: 5 }, { unit: "minute", n: 10 },
    { unit: "minute", n: 15 }, { unit: "minute", n: 30 },
    { unit: "hour", n: 1 }, { unit: "hour", n: 2 }, { unit: "hour", n: 3 }, { unit: "hour", n: 6 }, { unit: "hour", n: 12 },
    { unit: "day", n: 1 }, { unit: "week", n: 1 },
    { unit: "month", n: 1 }, { unit: "month", n: 3 }, { unit: "month", n: 6 },
    { unit: "year", n: 1 }, { unit: "year", n: 2 }, { unit: "year", n: 5 }, { unit: "year", n: 10 },
    { unit: "year", n: 20 }, { unit: "year", n: 50 }, { unit: "year", n: 100 }
  ];
  var UNIT_MS = { minute: MINUTE, hour: HOUR, day: DAY, week: 7 * DAY, month: 30.44 * DAY, year: 365.25 * DAY };
  // 1970-01-01 was a Thursday: Mondays are 4 days after the epoch, modulo a week.
  var FIRST_MONDAY = 4 * DAY;

  function pad2(n) { return (n < 10 ? "0" : "") + n; }

  function tickTimes(step, fromMs, toMs) {
    var out = [], t, d, y, m;
    if (step.unit === "minute" || step.unit === "hour" || step.unit === "day") {
      var ms = step.n * UNIT_MS[step.unit];
      for (t = Math.ceil(fromMs / ms) * ms; t <= toMs; t += ms) out.push(t);
    } else if (step.unit === "week") {
      var week = 7 * DAY;
      for (t = FIRST_MONDAY + Math.ceil((fromMs - FIRST_MONDAY) / week) * week; t <= toMs; t += week) out.push(t);
    } else if (step.unit === "month") {
      d = new Date(fromMs);
      y = d.getUTCFullYear();
      m = Math.ceil(d.getUTCMonth() / step.n) * step.n;
      for (t = Date.UTC(y, m, 1); t < fromMs; t = Date.UTC(y, m, 1)) m += step.n;
      for (; t <= toMs; t = Date.UTC(y, m, 1)) { out.push(t); m += step.n; }
    } else {
      y = Math.ceil(new Date(fromMs).getUTCFullYear() / step.n) * step.n;
      for (t = Date.UTC(y, 0, 1); t < fromMs; t = Date.UTC(y, 0, 1)) y += step.n;
      for (; t <= toMs; t = Date.UTC(y, 0, 1)) { out.push(t); y += step.n; }
    }
    return out;
  }

  function timeLabel(t, unit) {
    var d = new Date(t);
    var day = MONTHS[d.getUTCMonth()] + " " + d.getUTCDate();
    var newYear = d.getUTCMonth() === 0 && d.getUTCDate() === 1;
    if (unit === "minute" || unit === "hour") {
      if (d.getUTCHours() !== 0 || d.getUTCMinutes() !== 0) return pad2(d.getUTCHours()) + ":" + pad2(d.getUTCMinutes());
      return newYear ? String(d.getUTCFullYear()) : day;
    }
    if (unit === "day" || unit === "week") return newYear ? String(d.getUTCFullYear()) : day;
    if (unit === "month") return d.getUTCMonth() === 0 ? "Jan " + d.getUTCFullYear() : MONTHS[d.getUTCMonth()];
    return String(d.getUTCFullYear());
  }

  /**
   * Time ticks at round calendar values (whole minutes, hours, UTC midnights, Mondays, first
   * days of months, new years), the finest step that gives at most maxTicks over the span.
   */
  function calendarTicks(fromMs, toMs, maxTicks) {
    var span = Math.max(toMs - fromMs, 1);
    var step = TIME_STEPS[TIME_STEPS.length - 1];
    for (var i = 0; i < TIME_STEPS.length; i++) {
      var candidate = TIME_STEPS[i];
      if (span / (candidate.n * UNIT_MS[candidate.unit]) <= maxTicks) { step = candidate; break; }
    }
    var ticks = tickTimes(step, fromMs, toMs).map(function (t) { return { time: t, label: timeLabel(t, step.unit) }; });
    return { unit: step.unit, n: step.n, ticks: ticks };
  }

  /** Value ticks at multiples of 1, 2 or 5 times a power of ten, at most maxTicks in [lo, hi]. */
  function valueTicks(lo, hi, maxTicks) {
    if (!(hi > lo)) {
      var pad = Math.abs(lo) * 0.01 || 1;
      lo -= pad;
      hi += pad;
    }
    var raw = (hi - lo) / Math.max(1, Math.floor(maxTicks));
    var exponent = Math.floor(Math.log10(raw));
    // log10 of an exact power of ten can land a hair off: settle the exponent by comparison.
    if (Math.pow(10, exponent + 1) <= raw) exponent += 1;
    if (Math.pow(10, exponent) > raw) exponent -= 1;
    var multiples = [1, 2, 5, 10], multiple = 10;
    for (var i = 0; i < multiples.length; i++) {
      if (multiples[i] * Math.pow(10, exponent) >= raw) { multiple = multiples[i]; break; }
    }
    if (multiple === 10) { multiple = 1; exponent += 1; }
    var step = multiple * Math.pow(10, exponent);
    var decimals = Math.max(0, -exponent);
    var ticks = [];
    for (var k = Math.ceil(lo / step - 1e-9); k <= Math.floor(hi / step + 1e-9); k++) {
      var label = (k * step).toFixed(decimals);
      if (label === "-0" || /^-0\.0*$/.test(label)) label = label.slice(1);
      ticks.push({ value: Number(label), label: label });
    }
    return { step: step, decimals: decimals, ticks: ticks };
  }

  /** The first index whose x is at least value (xs ascending). */
  function lowerBound(xs, value) {
    var lo = 0, hi = xs.length;
    while (lo < hi) {
      var mid = (lo + hi) >> 1;
      if (xs[mid] < value) lo = mid + 1; else hi = mid;
    }
    return lo;
  }

  function isGap(y) { return y === null || y !== y; }

  /**
   * The indices to draw of the points in [from, to], plus one either side so lines run to the
   * edges. Past 4 points per bucket, each of the buckets keeps its first, lowest, highest and
   * last point, so a one-candle spike survives. A gap (null) is kept once, to break the line.
   */
  function envelope(xs, ys, from, to, buckets) {
    var start = Math.max(0, lowerBound(xs, from) - 1);
    var end = Math.min(xs.length, lowerBound(xs, to) + 1);
    var out = [], i;
    if (end - start <= buckets * 4) {
      for (i = start; i < end; i++) out.push(i);
      return out;
    }
    var width = (to - from) / buckets;
    var bucket = null, first = -1, low = -1, high = -1, last = -1, gapOpen = false;
    function flush() {
      if (first < 0) return;
      var picked = [first, low, high, last].sort(function (a, b) { return a - b; });
      for (var j = 0; j < picked.length; j++) if (j === 0 || picked[j] !== picked[j - 1]) out.push(picked[j]);
      first = -1;
    }
    for (i = start; i < end; i++) {
      var y = ys[i];
      if (isGap(y)) {
        flush();
        if (!gapOpen) out.push(i);
        gapOpen = true;
        continue;
      }
      gapOpen = false;
      var b = Math.floor((xs[i] - from) / width);
      if (b !== bucket || first < 0) {
        flush();
        bucket = b;
        first = low = high = last = i;
        continue;
      }
      if (y < ys[low]) low = i;
      if (y > ys[high]) high = i;
      last = i;
    }
    flush();
    return out;
  }

  /**
   * Which markers to draw, given their positions (ascending) and sides: at most one per side in
   * each cell of cellWidth, the first of it. Zoomed in far enough, every marker has a cell.
   */
  function thinMarkers(positions, sides, cellWidth) {
    var kept = [], lastCell = {};
    for (var i = 0; i < positions.length; i++) {
      var cell = Math.floor(positions[i] / cellWidth);
      if (lastCell[sides[i]] === cell) continue;
      lastCell[sides[i]] = cell;
      kept.push(i);
    }
    return kept;
  }

  return { calendarTicks: calendarTicks, valueTicks: valueTicks, envelope: envelope, lowerBound: lowerBound, thinMarkers: thinMarkers };
})();
`

/** Draws the page from `#report-data` with `SvcChart`; needs the DOM. */
export const CHART_APP = String.raw`
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var W = 1000, PAD = { left: 76, right: 14, top: 10, bottom: 24 };
  var PLOT_W = W - PAD.left - PAD.right;
  // A marker cell is about ten pixels wide: closer fills than that would only paint the price over.
  var MARKER_CELL = 10;
  var MIN_SPAN = Math.min(data.span, 20);
  var TRADE_ROWS = 500;
  var full = { from: 0, to: data.span };
  var view = { from: 0, to: data.span };
  // Series with a point per candle share one array of times: the closes, and for the equity
  // marks the first open before them.
  var markTimes = [0].concat(data.closeTimes);
  [data.price, data.equity, data.benchmark, data.drawdown].concat(data.plots).forEach(function (series) {
    if (!series.x) series.x = series.y.length === data.closeTimes.length ? data.closeTimes : markTimes;
  });
  var timeOf = function (x) { return data.t0 + x * data.step; };
  var fmtTime = function (t) { return new Date(t).toISOString().slice(0, 16).replace("T", " "); };

  var charts = [
    { id: "price-chart", height: 300, lines: [{ cls: "price", s: data.price }].concat(data.plots.map(function (p, k) { return { cls: "plot", color: p.color, s: p, name: p.name }; })), markers: true },
    { id: "equity-chart", height: 220, lines: [{ cls: "equity", s: data.equity }, { cls: "benchmark", s: data.benchmark }] },
    { id: "drawdown-chart", height: 150, lines: [], area: { cls: "drawdown", s: data.drawdown }, unit: " %" }
  ];

  function yRange(series, idx, lo, hi) {
    for (var i = 0; i < idx.length; i++) {
      var y = series.y[idx[i]];
      if (y === null) continue;
      if (y < lo) lo = y;
      if (y > hi) hi = y;
    }
    return [lo, hi];
  }

  function pathOf(series, idx, sx, sy) {
    var d = "", pen = "M";
    for (var i = 0; i < idx.length; i++) {
      var y = series.y[idx[i]];
      if (y === null) { pen = "M"; continue; }
      d += pen + sx(series.x[idx[i]]).toFixed(1) + " " + sy(y).toFixed(1);
      pen = "L";
    }
    return d;
  }

  function draw(chart, timeTicks) {
    var svg = document.getElementById(chart.id);
    var H = chart.height, plotH = H - PAD.top - PAD.bottom;
    var span = view.to - view.from;
    var sx = function (x) { return PAD.left + ((x - view.from) / span) * PLOT_W; };
    var all = chart.lines.slice();
    if (chart.area) all.push(chart.area);
    var picked = all.map(function (line) { return SvcChart.envelope(line.s.x, line.s.y, view.from, view.to, PLOT_W); });
    var range = [Infinity, -Infinity];
    all.forEach(function (line, k) { range = yRange(line.s, picked[k], range[0], range[1]); });
    if (chart.area) range[1] = 0;
    if (!(range[0] <= range[1])) range = [0, 1];
    var ticks = SvcChart.valueTicks(range[0], range[1], Math.max(3, Math.floor(plotH / 40)));
    var lo = Math.min(range[0], ticks.ticks.length ? ticks.ticks[0].value : range[0]);
    var hi = Math.max(range[1], ticks.ticks.length ? ticks.ticks[ticks.ticks.length - 1].value : range[1]);
    if (!(hi > lo)) { lo -= 1; hi += 1; }
    var margin = (hi - lo) * 0.03;
    lo -= margin;
    hi += margin;
    var sy = function (y) { return PAD.top + (1 - (y - lo) / (hi - lo)) * plotH; };
    var parts = ['<defs><clipPath id="clip-' + chart.id + '"><rect x="' + PAD.left + '" y="' + PAD.top + '" width="' + PLOT_W + '" height="' + plotH + '"/></clipPath></defs>'];
    ticks.ticks.forEach(function (tick) {
      var y = sy(tick.value).toFixed(1);
      parts.push('<line class="grid" x1="' + PAD.left + '" x2="' + (W - PAD.right) + '" y1="' + y + '" y2="' + y + '"/>');
      parts.push('<text class="tick value-tick" x="' + (PAD.left - 6) + '" y="' + y + '" text-anchor="end" dominant-baseline="middle">' + tick.label + (chart.unit || "") + "</text>");
    });
    timeTicks.ticks.forEach(function (tick) {
      var x = sx((tick.time - data.t0) / data.step).toFixed(1);
      parts.push('<line class="grid" x1="' + x + '" x2="' + x + '" y1="' + PAD.top + '" y2="' + (PAD.top + plotH) + '"/>');
      // A label at either edge of the plot is kept inside the chart.
      var anchor = x < PAD.left + 24 ? "start" : x > W - PAD.right - 24 ? "end" : "middle";
      parts.push('<text class="tick time-tick" x="' + x + '" y="' + (H - 7) + '" text-anchor="' + anchor + '">' + tick.label + "</text>");
    });
    parts.push('<g clip-path="url(#clip-' + chart.id + ')">');
    if (chart.area) {
      var line = pathOf(chart.area.s, picked[picked.length - 1], sx, sy);
      if (line) {
        var zero = sy(0).toFixed(1);
        parts.push('<path class="area ' + chart.area.cls + '" d="M' + line.slice(1).split(" ")[0] + " " + zero + " L" + line.slice(1) + " V" + zero + ' Z"/>');
      }
    }
    chart.lines.forEach(function (line, k) {
      var style = line.color ? ' style="stroke:' + line.color + '"' : "";
      var name = line.name ? ' data-name="' + line.name.replace(/[&<>"']/g, "") + '"' : "";
      parts.push('<path class="line ' + line.cls + '"' + style + name + ' d="' + pathOf(line.s, picked[k], sx, sy) + '"/>');
    });
    var shown = 0;
    if (chart.markers) shown = drawMarkers(parts, sx, sy, span);
    parts.push("</g>");
    parts.push('<line class="crosshair" x1="0" x2="0" y1="' + PAD.top + '" y2="' + (PAD.top + plotH) + '" visibility="hidden"/>');
    svg.setAttribute("viewBox", "0 0 " + W + " " + H);
    svg.innerHTML = parts.join("");
    if (chart.markers) svg.setAttribute("data-markers", String(shown));
  }

  function drawMarkers(parts, sx, sy, span) {
    var f = data.fills;
    var start = SvcChart.lowerBound(f.x, view.from), end = SvcChart.lowerBound(f.x, view.to + 1e-9);
    var positions = [], sides = [];
    for (var i = start; i < end; i++) { positions.push(sx(f.x[i])); sides.push(f.side[i]); }
    // Zoomed in until every candle has a cell of its own, every fill is drawn.
    var kept = span * MARKER_CELL <= PLOT_W ? positions.map(function (_, k) { return k; }) : SvcChart.thinMarkers(positions, sides, MARKER_CELL);
    kept.forEach(function (k) {
      var i = start + k, x = positions[k].toFixed(1), y = sy(f.price[i]);
      var buy = f.side[i] === "buy";
      var d = buy ? "M" + x + " " + (y + 1).toFixed(1) + " l-2.5 5 h5 z" : "M" + x + " " + (y - 1).toFixed(1) + " l-2.5 -5 h5 z";
      parts.push('<path class="marker ' + f.side[i] + '" d="' + d + '"><title>' + f.label[i] + "</title></path>");
    });
    var note = document.getElementById("marker-note");
    if (note) note.textContent = kept.length === end - start ? (end - start) + " fills shown" : kept.length + " of " + (end - start) + " fills in view shown (zoom in for all)";
    return kept.length;
  }

  var pending = false;
  function render() {
    pending = false;
    var timeTicks = SvcChart.calendarTicks(timeOf(view.from), timeOf(view.to), Math.floor(PLOT_W / 64));
    charts.forEach(function (chart) { draw(chart, timeTicks); });
    var holder = document.getElementById("charts");
    holder.setAttribute("data-from", String(timeOf(view.from)));
    holder.setAttribute("data-to", String(timeOf(view.to)));
    document.getElementById("range").textContent = fmtTime(timeOf(view.from)) + " to " + fmtTime(timeOf(view.to)) + " UTC";
  }
  function schedule() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(render);
  }

  function setView(from, to) {
    var span = Math.min(Math.max(to - from, MIN_SPAN), full.to - full.from);
    from = Math.min(Math.max(from, full.from), full.to - span);
    view = { from: from, to: from + span };
    schedule();
  }
  /** The x (candle units) under a client position over a chart. */
  function xAt(svg, clientX) {
    var box = svg.getBoundingClientRect();
    var vx = ((clientX - box.left) / box.width) * W;
    var ratio = Math.min(Math.max((vx - PAD.left) / PLOT_W, 0), 1);
    return view.from + ratio * (view.to - view.from);
  }
  function zoom(factor, anchor) {
    var span = view.to - view.from;
    var next = Math.min(Math.max(span * factor, MIN_SPAN), full.to - full.from);
    setView(anchor - ((anchor - view.from) * next) / span, anchor - ((anchor - view.from) * next) / span + next);
  }

  charts.forEach(function (chart) {
    var svg = document.getElementById(chart.id);
    svg.addEventListener("wheel", function (event) {
      event.preventDefault();
      zoom(event.deltaY > 0 ? 1.25 : 0.8, xAt(svg, event.clientX));
    }, { passive: false });
    var drag = null;
    svg.addEventListener("pointerdown", function (event) {
      drag = { clientX: event.clientX, from: view.from, to: view.to, width: svg.getBoundingClientRect().width };
      svg.setPointerCapture(event.pointerId);
    });
    svg.addEventListener("pointermove", function (event) {
      if (drag === null) return point(xAt(svg, event.clientX));
      var shift = ((event.clientX - drag.clientX) / drag.width) * (W / PLOT_W) * (drag.to - drag.from);
      setView(drag.from - shift, drag.to - shift);
    });
    var stop = function () { drag = null; };
    svg.addEventListener("pointerup", stop);
    svg.addEventListener("pointercancel", stop);
    svg.addEventListener("dblclick", function () { setView(full.from, full.to); });
    svg.addEventListener("pointerleave", function () { point(null); });
  });

  // What the charts show at the candle close under the pointer, with a line across all three.
  var readout = document.getElementById("readout");
  function valueAt(series, x) {
    var i = Math.min(SvcChart.lowerBound(series.x, x), series.x.length - 1);
    return i < 0 ? null : series.y[i];
  }
  function shown(label, value, unit) {
    return value === null || value === undefined ? "" : "  " + label + " " + Number(value.toPrecision(8)) + (unit || "");
  }
  function point(x) {
    var close = x === null ? null : Math.min(Math.max(Math.round(x), 1), full.to);
    var px = close === null ? 0 : PAD.left + ((close - view.from) / (view.to - view.from)) * PLOT_W;
    charts.forEach(function (chart) {
      var line = document.querySelector("#" + chart.id + " line.crosshair");
      if (!line) return;
      line.setAttribute("x1", px.toFixed(1));
      line.setAttribute("x2", px.toFixed(1));
      line.setAttribute("visibility", close === null ? "hidden" : "visible");
    });
    if (close === null) { readout.textContent = ""; return; }
    readout.textContent = fmtTime(timeOf(close)) + shown("close", valueAt(data.price, close))
      + data.plots.map(function (plot) { return shown(plot.name, valueAt(plot, close)); }).join("")
      + shown("equity", valueAt(data.equity, close)) + shown("buy and hold", valueAt(data.benchmark, close))
      + shown("drawdown", valueAt(data.drawdown, close), " %");
  }
  var centre = function () { return (view.from + view.to) / 2; };
  document.getElementById("zoom-in").addEventListener("click", function () { zoom(0.5, centre()); });
  document.getElementById("zoom-out").addEventListener("click", function () { zoom(2, centre()); });
  document.getElementById("zoom-all").addEventListener("click", function () { setView(full.from, full.to); });

  // The round-trip table: sorted on a header click (again for the other direction).
  var trades = data.trades;
  var table = document.getElementById("trades");
  if (table) setUpTrades();
  render();

  function setUpTrades() {
    var sort = { col: 0, dir: 1 };
    function renderTrades() {
      var col = sort.col, dir = sort.dir;
      var rows = trades.map(function (trade, i) { return i; });
      rows.sort(function (a, b) {
        var va = trades[a].key[col], vb = trades[b].key[col];
        if (va === vb) return a - b;
        if (va === null) return 1;
        if (vb === null) return -1;
        return (va < vb ? -1 : 1) * dir;
      });
      var html = rows.slice(0, TRADE_ROWS).map(function (i) {
        var cells = trades[i].text.map(function (text, c) { return "<td" + (data.tradeColumns[c].num ? ' class="num"' : "") + ">" + text + "</td>"; }).join("");
        return '<tr data-trade="' + i + '">' + cells + "</tr>";
      }).join("");
      table.tBodies[0].innerHTML = html;
      Array.prototype.forEach.call(table.tHead.rows[0].cells, function (cell, c) {
        cell.setAttribute("aria-sort", c === col ? (dir > 0 ? "ascending" : "descending") : "none");
      });
      document.getElementById("trades-note").textContent = trades.length > TRADE_ROWS
        ? "the first " + TRADE_ROWS + " of " + trades.length + " round trips in this order"
        : trades.length + " round trips";
    }
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (cell, c) {
      cell.addEventListener("click", function () {
        sort = { col: c, dir: sort.col === c ? -sort.dir : 1 };
        renderTrades();
      });
    });
    // A click on a trade shows it on the charts, with as much time either side as it lasted.
    table.tBodies[0].addEventListener("click", function (event) {
      var row = event.target.closest("tr");
      if (!row) return;
      var trade = trades[Number(row.getAttribute("data-trade"))];
      var from = (trade.openedAt - data.t0) / data.step, to = ((trade.closedAt === null ? timeOf(full.to) : trade.closedAt) - data.t0) / data.step;
      var pad = Math.max(to - from, MIN_SPAN);
      setView(from - pad, to + pad);
    });
    renderTrades();
  }
})();
`
