// eddy's web UI: plain JavaScript, no framework, nothing fetched from
// elsewhere. It polls the app's own endpoints:
//   /v1/status    tasks and readiness (every second)
//   /v1/topology  the topology graph (once)
//   /metrics      Prometheus text, parsed here; rates are computed from
//                 the counters' deltas between two scrapes (every second);
//                 the state memory panel reads eddy_state_memory_* there
//   /v1/stores/{store}/keys/{key}  the lookup box
// A part whose endpoint is not served says so instead of failing.
// Chart elements carry data-points (how many points they hold) so that a
// test can see they draw live data without reading pixels.
"use strict";

const POLL_MS = 1000;
const HISTORY = 180; // points per series: three minutes at one a second

const $ = (id) => document.getElementById(id);

// ---- formatting --------------------------------------------------------

function fmtNum(v) {
  if (v == null || !isFinite(v)) return "–";
  const a = Math.abs(v);
  if (a >= 1e9) return (v / 1e9).toFixed(a >= 1e10 ? 1 : 2) + "G";
  if (a >= 1e6) return (v / 1e6).toFixed(a >= 1e7 ? 1 : 2) + "M";
  if (a >= 1e4) return (v / 1e3).toFixed(a >= 1e5 ? 0 : 1) + "k";
  if (a >= 100 || v === Math.round(v)) return Math.round(v).toString();
  return v.toFixed(a >= 10 ? 1 : 2);
}

function fmtBytes(v) {
  if (v == null || !isFinite(v)) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return (i === 0 ? v.toFixed(0) : v.toFixed(v >= 100 ? 0 : v >= 10 ? 1 : 2)) + " " + units[i];
}

function fmtSeconds(s) {
  if (s == null || !isFinite(s)) return "–";
  if (s < 1e-3) return (s * 1e6).toFixed(0) + " µs";
  if (s < 1) return (s * 1e3).toFixed(s < 0.01 ? 2 : s < 0.1 ? 1 : 0) + " ms";
  if (s < 120) return s.toFixed(1) + " s";
  if (s < 7200) return Math.floor(s / 60) + " min " + Math.round(s % 60) + " s";
  return Math.floor(s / 3600) + " h " + Math.round((s % 3600) / 60) + " min";
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else e.setAttribute(k, v);
  }
  for (const c of children) if (c != null) e.append(c);
  return e;
}

async function getJSON(path) {
  const r = await fetch(path, { cache: "no-store" });
  if (!r.ok) { const err = new Error(path + ": HTTP " + r.status); err.status = r.status; throw err; }
  return r.json();
}

// ---- Prometheus text format ------------------------------------------

// parseProm returns the samples of a Prometheus text exposition as
// [{name, labels: {k: v}, value}], skipping comments.
function parseProm(text) {
  const out = [];
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line || line[0] === "#") continue;
    let name, labels = {}, rest;
    const brace = line.indexOf("{");
    const space = line.indexOf(" ");
    if (brace >= 0 && (space < 0 || brace < space)) {
      name = line.slice(0, brace);
      const end = parseLabels(line, brace + 1, labels);
      rest = line.slice(end + 1).trim();
    } else {
      name = line.slice(0, space);
      rest = line.slice(space + 1).trim();
    }
    const value = parseFloat(rest.split(/\s+/)[0]);
    out.push({ name, labels, value });
  }
  return out;
}

// parseLabels reads label pairs from i (after "{") into labels and returns
// the index of the closing "}". Values are quoted, with \\, \" and \n escapes.
function parseLabels(s, i, labels) {
  while (i < s.length) {
    while (s[i] === " " || s[i] === ",") i++;
    if (s[i] === "}") return i;
    const eq = s.indexOf("=", i);
    const key = s.slice(i, eq).trim();
    i = eq + 2; // past ="
    let v = "";
    while (i < s.length && s[i] !== '"') {
      if (s[i] === "\\") { i++; v += s[i] === "n" ? "\n" : s[i]; } else v += s[i];
      i++;
    }
    labels[key] = v;
    i++; // past the closing quote
  }
  return i;
}

function sum(samples, name, filter) {
  let total = 0, found = false;
  for (const s of samples) {
    if (s.name === name && (!filter || filter(s.labels))) { total += s.value; found = true; }
  }
  return found ? total : null;
}

// histogramQuantile estimates quantile q from the deltas of cumulative
// bucket counts (by le), interpolating linearly inside the bucket.
function histogramQuantile(q, buckets) {
  const les = Object.keys(buckets).map(Number).sort((a, b) => a - b);
  if (!les.length) return null;
  const total = buckets[les[les.length - 1]];
  if (!(total > 0)) return null;
  const rank = q * total;
  let prevLe = 0, prevCount = 0;
  for (const le of les) {
    const c = buckets[le];
    if (c >= rank) {
      if (!isFinite(le)) return prevLe;
      const inBucket = c - prevCount;
      return prevLe + (le - prevLe) * (inBucket > 0 ? (rank - prevCount) / inBucket : 0);
    }
    prevLe = le; prevCount = c;
  }
  return prevLe;
}

// ---- charts on canvas ---------------------------------------------------

const COLORS = {
  a: "#2dd4bf", b: "#818cf8", c: "#fbbf24", d: "#f472b6",
  series: ["#c084fc", "#2dd4bf", "#fbbf24", "#60a5fa", "#f472b6", "#34d399", "#fb923c"],
};

class Chart {
  // fmt formats a value with its unit for the axis and the last value.
  constructor(id, fmt) {
    this.fig = $(id);
    this.canvas = this.fig.querySelector("canvas");
    this.note = this.fig.querySelector(".note");
    this.fmt = fmt;
    this.series = new Map(); // name → {color, points: [[t, v]]}
  }
  // push adds a point; dash, if given, draws the line dashed (so that
  // two series that coincide both show).
  push(name, color, t, v, dash) {
    if (v == null || !isFinite(v)) return;
    let s = this.series.get(name);
    if (!s) { s = { color, dash: dash || [], points: [] }; this.series.set(name, s); }
    s.points.push([t, v]);
    if (s.points.length > HISTORY) s.points.shift();
  }
  unavailable(msg) {
    this.note.textContent = msg;
    this.note.hidden = false;
    this.canvas.hidden = true;
    this.fig.dataset.state = "unavailable";
  }
  available() {
    this.note.hidden = true;
    this.canvas.hidden = false;
    this.fig.dataset.state = "live";
  }
  draw() {
    let n = 0, max = 0;
    for (const s of this.series.values()) {
      n = Math.max(n, s.points.length);
      for (const p of s.points) max = Math.max(max, p[1]);
    }
    this.fig.dataset.points = String(n);
    this.fig.dataset.max = String(max);
    const c = this.canvas, dpr = window.devicePixelRatio || 1;
    const w = c.clientWidth, h = c.clientHeight;
    if (!w || !h) return;
    if (c.width !== Math.round(w * dpr) || c.height !== Math.round(h * dpr)) {
      c.width = Math.round(w * dpr); c.height = Math.round(h * dpr);
    }
    const g = c.getContext("2d");
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, h);
    const left = 64, right = 12, top = 10, bottom = 22;
    const pw = w - left - right, ph = h - top - bottom;
    // The time axis spans the history held, at least 30 s, at most HISTORY
    // points: a page just opened shows its first seconds across the chart.
    const now = Date.now();
    let oldest = now;
    for (const s of this.series.values()) if (s.points.length) oldest = Math.min(oldest, s.points[0][0]);
    const spanSec = Math.min(HISTORY * POLL_MS / 1000, Math.max(30, Math.ceil((now - oldest) / 1000)));
    const span = spanSec * 1000;
    const step = spanSec <= 60 ? 10 : spanSec <= 120 ? 30 : 60;
    const ymax = niceCeil(max > 0 ? max * 1.1 : 1);
    g.font = "11px system-ui, 'DejaVu Sans', sans-serif";
    g.textBaseline = "middle";
    // Grid and y labels.
    for (let i = 0; i <= 4; i++) {
      const y = top + ph - (ph * i) / 4;
      g.strokeStyle = i === 0 ? "#334155" : "#1f2937";
      g.lineWidth = 1;
      g.beginPath(); g.moveTo(left, Math.round(y) + 0.5); g.lineTo(left + pw, Math.round(y) + 0.5); g.stroke();
      g.fillStyle = "#8b98a9";
      g.textAlign = "right";
      g.fillText(this.fmt((ymax * i) / 4), left - 8, y);
    }
    // x labels: minutes ago.
    g.textAlign = "center";
    g.textBaseline = "top";
    for (let sAgo = 0; sAgo <= spanSec; sAgo += step) {
      const x = left + pw - (sAgo * 1000 * pw) / span;
      const label = sAgo === 0 ? "now" : sAgo % 60 === 0 ? "−" + sAgo / 60 + " min" : "−" + sAgo + " s";
      g.fillText(label, Math.min(Math.max(x, left + 16), left + pw - 14), top + ph + 6);
    }
    if (n === 0) {
      g.fillStyle = "#8b98a9"; g.textAlign = "center"; g.textBaseline = "middle";
      g.font = "13px system-ui, 'DejaVu Sans', sans-serif";
      g.fillText("waiting for data…", left + pw / 2, top + ph / 2);
      return;
    }
    g.save();
    g.beginPath(); g.rect(left, top - 2, pw, ph + 4); g.clip();
    for (const s of this.series.values()) {
      if (!s.points.length) continue;
      const xy = s.points.map(([t, v]) => [left + pw - ((now - t) * pw) / span, top + ph - (v / ymax) * ph]);
      // A soft area under the line, then the line.
      const grad = g.createLinearGradient(0, top, 0, top + ph);
      grad.addColorStop(0, hexAlpha(s.color, 0.22));
      grad.addColorStop(1, hexAlpha(s.color, 0));
      g.beginPath();
      g.moveTo(xy[0][0], top + ph);
      for (const [x, y] of xy) g.lineTo(x, y);
      g.lineTo(xy[xy.length - 1][0], top + ph);
      g.closePath();
      g.fillStyle = grad; g.fill();
      g.beginPath();
      xy.forEach(([x, y], i) => (i ? g.lineTo(x, y) : g.moveTo(x, y)));
      g.setLineDash(s.dash);
      g.strokeStyle = s.color; g.lineWidth = 2; g.lineJoin = "round"; g.stroke();
      g.setLineDash([]);
      const [lx, ly] = xy[xy.length - 1];
      g.beginPath(); g.arc(lx, ly, 3, 0, 2 * Math.PI); g.fillStyle = s.color; g.fill();
    }
    g.restore();
    // The last values, top right.
    g.textAlign = "right"; g.textBaseline = "top";
    g.font = "600 12px system-ui, 'DejaVu Sans', sans-serif";
    // As many as fit; the legend names every series.
    let x = left + pw - 4;
    for (const [name, s] of [...this.series.entries()].reverse()) {
      if (!s.points.length) continue;
      const label = (this.series.size > 1 ? name + " " : "") + this.fmt(s.points[s.points.length - 1][1]);
      const w = g.measureText(label).width;
      if (x - w < left + 8) break;
      g.fillStyle = s.color;
      g.fillText(label, x, top + 2);
      x -= w + 14;
    }
  }
}

function niceCeil(v) {
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

function hexAlpha(hex, a) {
  const n = parseInt(hex.slice(1), 16);
  return `rgba(${(n >> 16) & 255},${(n >> 8) & 255},${n & 255},${a})`;
}

const charts = {
  throughput: new Chart("chart-throughput", (v) => fmtNum(v) + "/s"),
  lag: new Chart("chart-lag", fmtNum),
  commit: new Chart("chart-commit", fmtSeconds),
  state: new Chart("chart-state", fmtBytes),
};

// ---- metrics polling ------------------------------------------------------

let prevScrape = null; // {t, consumed, produced, commitSum, commitCount, buckets}

async function pollMetrics() {
  let text;
  try {
    const r = await fetch("metrics", { cache: "no-store" });
    if (r.status === 404) {
      for (const c of Object.values(charts)) {
        if (c !== charts.state || !stateFromStatus) c.unavailable("Metrics are not available: this app serves no /metrics endpoint.");
      }
      memoryUnavailable("State memory is not available: this app serves no /metrics endpoint.");
      return;
    }
    if (!r.ok) throw new Error("HTTP " + r.status);
    text = await r.text();
  } catch (e) {
    return; // the app may be restarting: keep the history, try again
  }
  const t = Date.now();
  const samples = parseProm(text);
  const cur = {
    t,
    consumed: sum(samples, "eddy_records_consumed_total"),
    produced: sum(samples, "eddy_records_produced_total"),
    commitSum: sum(samples, "eddy_commit_duration_seconds_sum"),
    commitCount: sum(samples, "eddy_commit_duration_seconds_count"),
    buckets: {},
    bufHits: sum(samples, "eddy_state_cache_hits_total"),
    bufMisses: sum(samples, "eddy_state_cache_misses_total"),
    evictions: sum(samples, "eddy_state_cache_evictions_total"),
    blockHits: sum(samples, "eddy_pebble_block_cache_hits_total"),
    blockMisses: sum(samples, "eddy_pebble_block_cache_misses_total"),
  };
  for (const s of samples) {
    if (s.name === "eddy_commit_duration_seconds_bucket") {
      const le = s.labels.le === "+Inf" ? Infinity : parseFloat(s.labels.le);
      cur.buckets[le] = (cur.buckets[le] || 0) + s.value;
    }
  }
  for (const c of [charts.throughput, charts.lag, charts.commit]) c.available();

  if (prevScrape) {
    const dt = (t - prevScrape.t) / 1000;
    const rate = (a, b) => (a != null && b != null && a >= b && dt > 0 ? (a - b) / dt : null);
    const consumed = rate(cur.consumed, prevScrape.consumed);
    const produced = rate(cur.produced, prevScrape.produced);
    charts.throughput.push("consumed", COLORS.a, t, consumed);
    charts.throughput.push("produced", COLORS.b, t, produced, [6, 4]);
    $("kpi-consumed").textContent = fmtNum(consumed);
    $("kpi-produced").textContent = fmtNum(produced);
    const dc = cur.commitCount != null && prevScrape.commitCount != null ? cur.commitCount - prevScrape.commitCount : null;
    if (dc > 0) {
      const mean = (cur.commitSum - prevScrape.commitSum) / dc;
      const delta = {};
      for (const le of Object.keys(cur.buckets)) delta[le] = cur.buckets[le] - (prevScrape.buckets[le] || 0);
      charts.commit.push("mean", COLORS.a, t, mean);
      charts.commit.push("p99", COLORS.d, t, histogramQuantile(0.99, delta));
      $("kpi-commit").textContent = fmtSeconds(mean);
    }
  }
  const lag = sum(samples, "eddy_consumer_lag_records");
  charts.lag.push("lag", COLORS.c, t, lag);
  $("kpi-lag").textContent = fmtNum(lag);

  // Store sizes: eddy_state_bytes per store, or per task (one database
  // per task holds all of its stores).
  const perStore = new Map();
  for (const s of samples) {
    if (s.name !== "eddy_state_bytes") continue;
    const key = s.labels.store || (s.labels.task ? "task " + s.labels.task : "all");
    perStore.set(key, (perStore.get(key) || 0) + s.value);
  }
  if (perStore.size) {
    if (!stateFromMetrics) charts.state.series.clear(); // drop what /v1/status gave
    stateFromMetrics = true;
    charts.state.available();
    let i = 0;
    for (const [store, v] of [...perStore.entries()].sort()) charts.state.push(store, COLORS.series[i++ % COLORS.series.length], t, v);
    renderStateLegend();
  }
  renderMemory(samples, cur, prevScrape);
  prevScrape = cur;
}

let stateFromMetrics = false, stateFromStatus = false;

function renderStateLegend() {
  const legend = $("state-legend");
  legend.textContent = "";
  for (const [name, s] of charts.state.series) {
    legend.append(el("i", { class: "sw", style: "background:" + s.color }), name + " ");
  }
  legend.append(el("span", { class: "muted" }, stateFromMetrics ? "eddy_state_bytes" : "on disk, from /v1/status"));
}

// ---- state memory ---------------------------------------------------------

// renderMemory shows the state memory budget (Config.StateMemory) and its
// use by part, from the eddy_state_memory_* series: the write buffers'
// cache of committed values against its half, the block cache's blocks
// and the memtables (Pebble charges them to the cache) against the other
// half, and all of them against the whole. Hit ratios are over the last
// scrape when it saw reads, else since the start. Each meter carries
// data-used and data-limit (bytes), and the caches data-hit-ratio, so that
// a test can read the figures without parsing text.
function renderMemory(samples, cur, prev) {
  const byPart = (name, part) => sum(samples, name, (l) => l.part === part);
  const lim = {
    buffers: byPart("eddy_state_memory_limit_bytes", "write_buffers"),
    cache: byPart("eddy_state_memory_limit_bytes", "block_cache"),
  };
  const used = {
    buffers: byPart("eddy_state_memory_used_bytes", "write_buffers"),
    blocks: byPart("eddy_state_memory_used_bytes", "block_cache"),
    memtables: byPart("eddy_state_memory_used_bytes", "memtables"),
  };
  if (lim.buffers == null && lim.cache == null) {
    memoryUnavailable("This app reports no state memory budget (no eddy_state_memory_limit_bytes series).");
    return;
  }
  const panel = $("memory");
  panel.dataset.state = "live";
  panel.querySelector(".note").hidden = true;
  const dt = prev ? (cur.t - prev.t) / 1000 : 0;

  const buffers = meter("mem-write-buffers", lim.buffers, [{ part: "write_buffers", bytes: used.buffers, color: COLORS.a }]);
  if (buffers) {
    const r = hitRatio(cur.bufHits, cur.bufMisses, prev && prev.bufHits, prev && prev.bufMisses, dt);
    let text = "cache hit ratio " + r.text;
    buffers.dataset.hitRatio = r.ratio != null ? String(r.ratio) : "";
    if (cur.evictions != null) {
      buffers.dataset.evictions = String(cur.evictions);
      const rate = prev && prev.evictions != null && dt > 0 && cur.evictions >= prev.evictions ? (cur.evictions - prev.evictions) / dt : null;
      text += " · " + fmtNum(cur.evictions) + " keys evicted" + (rate ? ", " + fmtNum(rate) + "/s" : "");
    }
    buffers.querySelector(".meter-sub").textContent = text;
  } else {
    $("mem-write-buffers").querySelector(".meter-sub").textContent = "not reported";
  }

  const cache = meter("mem-block-cache", lim.cache, [
    { part: "block_cache", bytes: used.blocks, color: COLORS.b },
    { part: "memtables", bytes: used.memtables, color: COLORS.d },
  ]);
  if (cache) {
    const r = hitRatio(cur.blockHits, cur.blockMisses, prev && prev.blockHits, prev && prev.blockMisses, dt);
    cache.dataset.hitRatio = r.ratio != null ? String(r.ratio) : "";
    cache.querySelector(".meter-sub").textContent = "blocks " + fmtBytes(used.blocks) + " · memtables " + fmtBytes(used.memtables) +
      " · block cache hit ratio " + (r.ratio == null && r.text === "no reads yet" ? "– (no lookup yet: memtables and write buffers answered)" : r.text);
  } else {
    $("mem-block-cache").querySelector(".meter-sub").textContent = "not reported: the app's state backend has no block cache eddy reads (its caches are its own)";
  }

  const total = (lim.buffers || 0) + (lim.cache || 0);
  meter("mem-total", total, [
    { part: "write_buffers", bytes: used.buffers, color: COLORS.a },
    { part: "block_cache", bytes: used.blocks, color: COLORS.b },
    { part: "memtables", bytes: used.memtables, color: COLORS.d },
  ]);
  $("mem-total").querySelector(".meter-sub").textContent = lim.cache != null
    ? "Config.StateMemory: half for the write buffers, half for the block cache and memtables"
    : "Config.StateMemory's half for the write buffers (the backend sizes its own caches)";
  const inUse = (used.buffers || 0) + (used.blocks || 0) + (used.memtables || 0);
  $("memory-summary").textContent = total > 0 ? " · " + (100 * inUse / total).toFixed(0) + " % of the budget in use" : "";
}

// meter fills the meter id with the parts' bytes against limit: a bar of
// one segment per part and "used / limit". It returns the meter, or null
// (the meter marked absent) when limit is not reported.
function meter(id, limit, parts) {
  const m = $(id);
  const figs = m.querySelector(".meter-figs"), bar = m.querySelector(".bar");
  bar.textContent = "";
  if (limit == null) {
    m.dataset.state = "absent";
    m.dataset.used = m.dataset.limit = "";
    figs.textContent = "–";
    return null;
  }
  const used = parts.reduce((a, p) => a + (p.bytes || 0), 0);
  m.dataset.state = "live";
  m.dataset.used = String(used);
  m.dataset.limit = String(limit);
  m.dataset.over = String(used > limit);
  figs.textContent = fmtBytes(used) + " / " + fmtBytes(limit);
  const scale = Math.max(limit, used, 1);
  for (const p of parts) {
    if (!(p.bytes > 0)) continue;
    bar.append(el("div", { "data-part": p.part, "data-bytes": String(p.bytes), title: p.part + " " + fmtBytes(p.bytes),
      style: `width:${(100 * p.bytes / scale).toFixed(2)}%;background:${p.color}` }));
  }
  return m;
}

// hitRatio is hits / (hits + misses) over the last dt seconds when they
// saw reads, else since the start; text says which.
function hitRatio(hits, misses, prevHits, prevMisses, dt) {
  if (hits == null || misses == null) return { ratio: null, text: "not reported" };
  if (prevHits != null && prevMisses != null && dt > 0) {
    const dh = hits - prevHits, dm = misses - prevMisses;
    if (dh >= 0 && dm >= 0 && dh + dm > 0) {
      return { ratio: dh / (dh + dm), text: fmtPercent(dh / (dh + dm)) + " (last " + (dt < 1.5 ? "second" : fmtSeconds(dt)) + ")" };
    }
  }
  const n = hits + misses;
  if (!(n > 0)) return { ratio: null, text: "no reads yet" };
  return { ratio: hits / n, text: fmtPercent(hits / n) + " (since start)" };
}

function fmtPercent(r) {
  const p = 100 * r;
  return (p >= 99.95 || p === 0 ? p.toFixed(0) : p >= 99 ? p.toFixed(2) : p.toFixed(1)) + " %";
}

function memoryUnavailable(msg) {
  const panel = $("memory"), note = panel.querySelector(".note");
  panel.dataset.state = "unavailable";
  note.textContent = msg;
  note.hidden = false;
  $("memory-summary").textContent = "";
}

// ---- status ------------------------------------------------------------

async function pollStatus() {
  let s;
  try {
    s = await getJSON("v1/status");
  } catch (e) {
    const pill = $("ready");
    pill.className = "pill pill-bad";
    pill.dataset.ready = "unknown";
    pill.textContent = e.status === 404 ? "no status endpoint" : "unreachable";
    $("ready-reason").textContent = e.status === 404 ? "" : "retrying…";
    return;
  }
  $("app-id").textContent = s.app_id;
  $("instance-id").textContent = s.instance_id;
  document.title = "eddy · " + s.app_id;
  const pill = $("ready");
  pill.dataset.ready = String(s.ready);
  if (s.ready) {
    pill.className = "pill pill-ok"; pill.textContent = "ready";
  } else if (s.state === "stopped") {
    pill.className = "pill pill-bad"; pill.textContent = "stopped";
  } else {
    pill.className = "pill pill-warn"; pill.textContent = s.state === "starting" ? "starting" : "not ready";
  }
  $("ready-reason").textContent = s.ready ? "every assigned task is restored and running" : s.not_ready || "";
  $("uptime").textContent = s.started ? fmtSeconds((Date.now() - Date.parse(s.started)) / 1000) : "–";
  renderTasks(s);
  $("kpi-state").textContent = fmtBytes(s.state_bytes);
  const active = s.tasks.filter((t) => t.worker >= 0);
  $("kpi-tasks").textContent = active.filter((t) => t.state === "running").length + " / " + active.length;
  const standbys = s.tasks.length - active.length;
  $("kpi-tasks-unit").textContent = "running" + (standbys ? ", " + standbys + " standby" : "");
  if (!stateFromMetrics) {
    // No eddy_state_bytes: chart the task databases' sizes on disk.
    stateFromStatus = true;
    charts.state.available();
    const perStore = new Map();
    for (const t of s.tasks) {
      const key = (t.stores || []).map((st) => st.name).join("+") || "stateless";
      if (key !== "stateless") perStore.set(key, (perStore.get(key) || 0) + t.state_bytes);
    }
    let i = 0;
    for (const [store, v] of [...perStore.entries()].sort()) charts.state.push(store, COLORS.series[i++ % COLORS.series.length], Date.now(), v);
    renderStateLegend();
  }
}

function renderTasks(s) {
  const body = $("tasks-body");
  body.textContent = "";
  if (!s.tasks.length) {
    body.append(el("tr", {}, el("td", { colspan: "6", class: "muted" }, s.state === "running" ? "no task assigned to this instance" : "no tasks yet")));
  }
  for (const t of s.tasks) {
    const stateCell = el("td", {});
    const pillClass = { running: "pill-ok", restoring: "pill-warn", closing: "pill-bad", standby: "pill-standby" }[t.state] || "pill-muted";
    stateCell.append(el("span", { class: "pill " + pillClass }, t.state));
    if (t.state === "restoring") {
      const r = t.restore;
      const pct = r ? r.percent : 0;
      const bar = el("div", { class: "progress", role: "progressbar", "aria-valuenow": pct.toFixed(0), "aria-valuemin": "0", "aria-valuemax": "100" },
        el("div", { style: "width:" + pct.toFixed(1) + "%" }));
      stateCell.append(bar);
      stateCell.append(el("div", { class: "sub" }, r
        ? `${pct.toFixed(1)}% · ${fmtNum(r.offsets_done)} / ${fmtNum(r.offsets)} offsets · ETA ${r.eta_seconds > 0 ? fmtSeconds(r.eta_seconds) : "–"}`
        : "waiting to restore"));
    } else if (t.state === "standby") {
      stateCell.append(el("span", { class: "sub" }, t.standby_lag != null ? "  lag " + fmtNum(t.standby_lag) + " offsets" : "  catching up"));
    }
    const stores = (t.stores || []).map((st) => st.name).join(", ") || "–";
    const stream = t.stream_time_ms != null ? new Date(t.stream_time_ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z") : "–";
    body.append(el("tr", { "data-task": t.id, "data-state": t.state },
      el("td", { class: "id" }, t.id),
      el("td", {}, t.worker >= 0 ? String(t.worker) : "–"),
      stateCell,
      el("td", {}, stores),
      el("td", { class: "num" }, fmtBytes(t.state_bytes)),
      el("td", { class: "sub" }, stream)));
  }
  const counts = {};
  for (const t of s.tasks) counts[t.state] = (counts[t.state] || 0) + 1;
  $("tasks-summary").textContent = Object.entries(counts).map(([k, v]) => v + " " + k).join(" · ");
}

// ---- topology graph (SVG) -------------------------------------------------

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs, ...children) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const c of children) if (c != null) e.append(c);
  return e;
}

const NODE_W = 220, NODE_H = 46, COL_GAP = 80, ROW_GAP = 18, STORE_H = 50, LANE_PAD = 18, LANE_HEAD = 30;

function shorten(s, n) { return s.length > n ? s.slice(0, n - 1) + "…" : s; }

function renderTopology(d) {
  const host = $("topology");
  host.textContent = "";
  const root = svg("svg", { role: "img", "aria-label": "topology of " + d.app_id });
  root.append(svg("defs", {},
    svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: "9", refY: "5", markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse" },
      svg("path", { d: "M0,0 L10,5 L0,10 z", fill: "#64748b" })),
    svg("marker", { id: "arrow-rep", viewBox: "0 0 10 10", refX: "9", refY: "5", markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse" },
      svg("path", { d: "M0,0 L10,5 L0,10 z", fill: "#fbbf24" }))));
  const pos = new Map(); // node name → {x, y}
  const byTopic = { source: new Map(), sink: new Map() };
  let y = 0, width = 0, count = 0;
  const lanes = [];
  for (const sub of d.subtopologies) {
    // Column = longest distance from a node without a parent.
    const depth = new Map();
    for (const n of sub.nodes) {
      depth.set(n.name, Math.max(0, ...(n.parents || []).map((p) => (depth.get(p) ?? -1) + 1)));
    }
    const cols = [];
    for (const n of sub.nodes) (cols[depth.get(n.name)] ||= []).push(n);
    let laneH = 0;
    cols.forEach((col, ci) => {
      let cy = 0;
      for (const n of col) {
        const h = NODE_H + (n.stores && n.stores.length ? n.stores.length * (STORE_H + 10) + 20 : 0);
        pos.set(n.name, { x: LANE_PAD + ci * (NODE_W + COL_GAP), y: y + LANE_HEAD + LANE_PAD + cy, node: n });
        cy += h + ROW_GAP;
      }
      laneH = Math.max(laneH, cy - ROW_GAP);
    });
    const laneW = LANE_PAD * 2 + cols.length * NODE_W + (cols.length - 1) * COL_GAP;
    lanes.push({ sub, y, h: LANE_HEAD + LANE_PAD * 2 + laneH, w: laneW });
    width = Math.max(width, laneW);
    y += LANE_HEAD + LANE_PAD * 2 + laneH + 40;
  }
  // Lanes span the panel when the graph is narrower.
  width = Math.max(width, host.clientWidth - 2);
  const height = Math.max(y - 40, 60);
  const layer = { lanes: svg("g", {}), edges: svg("g", {}), nodes: svg("g", {}) };
  for (const lane of lanes) {
    layer.lanes.append(
      svg("rect", { x: 0.5, y: lane.y + 0.5, width: width - 1, height: lane.h, rx: 10, fill: "#111821", stroke: "#263040" }),
      svg("text", { x: 14, y: lane.y + 20, fill: "#8b98a9", "font-size": 12, "font-weight": 600, "letter-spacing": ".05em" },
        `SUB-TOPOLOGY ${lane.sub.id}`),
      svg("text", { x: width - 14, y: lane.y + 20, fill: "#64748b", "font-size": 11, "text-anchor": "end" },
        `tasks ${lane.sub.id}_0, ${lane.sub.id}_1, … one per partition of ${(lane.sub.sources || []).concat((lane.sub.patterns || []).map((p) => `/${p}/`)).join(", ")}`));
  }
  const kindColor = { source: "#34d399", processor: "#60a5fa", sink: "#fb923c" };
  for (const [name, p] of pos) {
    const n = p.node;
    count++;
    const color = n.internal ? "#fbbf24" : kindColor[n.kind];
    const g = svg("g", { class: "node", "data-kind": n.kind, "data-name": n.name });
    g.append(svg("title", {}, `${n.kind} ${n.name}${n.topic ? "\ntopic " + n.topic : ""}${n.pattern ? "\ntopics matching " + n.pattern : ""}`));
    const shapeAttrs = { x: p.x, y: p.y, width: NODE_W, height: NODE_H, fill: hexAlpha(color, 0.12), stroke: color, "stroke-width": 1.5 };
    g.append(svg("rect", { ...shapeAttrs, rx: n.kind === "processor" ? 8 : NODE_H / 2 }));
    // A pattern source reads every topic its pattern matches: it has no topic of its own.
    const label = n.kind === "processor" ? n.name : n.topic || `/${n.pattern}/`;
    const sub = n.kind === "processor" ? "processor" : n.internal ? "repartition " + n.kind : `${n.kind} · ${n.name}`;
    g.append(svg("text", { x: p.x + NODE_W / 2, y: p.y + 19, fill: "#e2e8f0", "font-size": 13, "font-weight": 600, "text-anchor": "middle" }, shorten(label, 28)));
    g.append(svg("text", { x: p.x + NODE_W / 2, y: p.y + 35, fill: "#8b98a9", "font-size": 11, "text-anchor": "middle" }, shorten(sub, 34)));
    layer.nodes.append(g);
    if (n.topic) byTopic[n.kind]?.set(n.topic, name);
    (n.stores || []).forEach((st, i) => {
      const sy = p.y + NODE_H + 18 + i * (STORE_H + 10), sx = p.x + 20, sw = NODE_W - 40;
      const desc = (d.subtopologies.flatMap((s) => s.stores).find((s) => s.name === st) || {});
      const sg = svg("g", { class: "store", "data-name": st });
      sg.append(svg("title", {}, `store ${st}\nchangelog ${desc.changelog || ""}`));
      // A cylinder: the body, then the top ellipse.
      sg.append(svg("path", { d: `M${sx},${sy + 6} v${STORE_H - 12} a${sw / 2},6 0 0 0 ${sw},0 v${-(STORE_H - 12)}`, fill: hexAlpha("#c084fc", 0.12), stroke: "#c084fc", "stroke-width": 1.5 }));
      sg.append(svg("ellipse", { cx: sx + sw / 2, cy: sy + 6, rx: sw / 2, ry: 6, fill: "#1c1830", stroke: "#c084fc", "stroke-width": 1.5 }));
      sg.append(svg("text", { x: sx + sw / 2, y: sy + 27, fill: "#e9d5ff", "font-size": 12, "font-weight": 600, "text-anchor": "middle" }, shorten(st, 24)));
      sg.append(svg("text", { x: sx + sw / 2, y: sy + 42, fill: "#8b98a9", "font-size": 10, "text-anchor": "middle" }, shorten(desc.changelog || "", 30)));
      layer.edges.append(svg("line", { x1: p.x + NODE_W / 2, y1: p.y + NODE_H, x2: p.x + NODE_W / 2, y2: sy, stroke: "#c084fc", "stroke-dasharray": "3 3" }));
      layer.nodes.append(sg);
    });
  }
  // Edges between nodes of a sub-topology.
  for (const [name, p] of pos) {
    for (const child of p.node.children || []) {
      const q = pos.get(child);
      if (!q) continue;
      const x1 = p.x + NODE_W, y1 = p.y + NODE_H / 2, x2 = q.x - 2, y2 = q.y + NODE_H / 2, mx = (x1 + x2) / 2;
      layer.edges.append(svg("path", { d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}`, fill: "none", stroke: "#64748b", "stroke-width": 1.5, "marker-end": "url(#arrow)" }));
    }
  }
  // Repartition topics: a sink of one sub-topology to the source of another.
  let repLinks = 0;
  for (const [topic, sinkName] of byTopic.sink) {
    const srcName = byTopic.source.get(topic);
    if (!srcName) continue;
    const p = pos.get(sinkName), q = pos.get(srcName);
    const x1 = p.x + NODE_W / 2, y1 = p.y + NODE_H, x2 = q.x + NODE_W / 2, y2 = q.y - 2;
    layer.edges.append(svg("path", {
      d: `M${x1},${y1} C${x1},${y1 + 60} ${x2},${y2 - 60} ${x2},${y2}`,
      fill: "none", stroke: "#fbbf24", "stroke-width": 1.5, "stroke-dasharray": "6 4", "marker-end": "url(#arrow-rep)", class: "repartition",
    }, svg("title", {}, "repartition topic " + topic)));
    repLinks++;
  }
  // Global stores, listed under the lanes.
  let gy = height + 24;
  for (const gs of d.global_stores || []) {
    layer.nodes.append(svg("text", { x: 6, y: gy, fill: "#c084fc", "font-size": 12 }, `global store ${gs.name} ← ${gs.topic}`));
    gy += 18;
  }
  const totalH = (d.global_stores || []).length ? gy : height;
  root.setAttribute("viewBox", `0 0 ${width} ${totalH}`);
  root.setAttribute("width", width);
  root.setAttribute("height", totalH);
  root.append(layer.lanes, layer.edges, layer.nodes);
  host.append(root);
  host.dataset.nodes = String(count);
  host.dataset.subtopologies = String(d.subtopologies.length);
  host.dataset.repartitions = String(repLinks);

  // The lookup box offers the topology's stores.
  const select = $("lookup-store");
  const stores = d.subtopologies.flatMap((s) => s.stores.map((st) => st.name)).concat((d.global_stores || []).map((g) => g.name));
  select.textContent = "";
  for (const st of stores) select.append(el("option", { value: st }, st));
}

async function loadTopology() {
  try {
    renderTopology(await getJSON("v1/topology"));
  } catch (e) {
    $("topology").innerHTML = "";
    $("topology").append(el("p", { class: "muted" }, e.status === 404
      ? "The topology is not available: this app serves no /v1/topology endpoint."
      : "Could not load the topology (" + e.message + "); retrying…"));
    if (e.status !== 404) setTimeout(loadTopology, 3000);
  }
}

// ---- state lookup ---------------------------------------------------------

async function lookup(ev) {
  ev.preventDefault();
  const store = $("lookup-store").value, key = $("lookup-key").value;
  const out = $("lookup-result"), status = $("lookup-status");
  if (!store || !key) { status.textContent = "Pick a store and type a key."; return; }
  const path = "v1/stores/" + encodeURIComponent(store) + "/keys/" + encodeURIComponent(key);
  status.textContent = "GET /" + path + " …";
  out.dataset.state = "loading";
  const started = performance.now();
  let r, body;
  try {
    r = await fetch(path, { cache: "no-store" });
    body = await r.text();
  } catch (e) {
    out.dataset.state = "error"; out.textContent = String(e); status.textContent = "request failed";
    return;
  }
  const took = fmtSeconds((performance.now() - started) / 1000);
  const json = (r.headers.get("Content-Type") || "").includes("json");
  let pretty = body;
  if (json) { try { pretty = JSON.stringify(JSON.parse(body), null, 2); } catch (_) { /* show it raw */ } }
  if (r.ok) {
    out.dataset.state = "ok";
    status.textContent = `${store}[${key}] · HTTP ${r.status} · ${took}`;
  } else if (r.status === 404 && json) {
    out.dataset.state = "not-found";
    status.textContent = `${store}[${key}] · not found · ${took}`;
  } else if ((r.status === 404 || r.status === 405) && !json) {
    out.dataset.state = "unavailable";
    status.textContent = "State queries are not available: this app serves no /v1/stores endpoint.";
    pretty = "";
  } else {
    out.dataset.state = "error";
    status.textContent = `HTTP ${r.status} · ${took}`;
  }
  out.textContent = pretty;
}

// ---- main loop --------------------------------------------------------------

function drawAll() { for (const c of Object.values(charts)) c.draw(); }

async function tick() {
  await Promise.all([pollStatus(), pollMetrics()]);
  drawAll();
}

$("lookup").addEventListener("submit", lookup);
window.addEventListener("resize", drawAll);
loadTopology();
tick();
setInterval(tick, POLL_MS);
