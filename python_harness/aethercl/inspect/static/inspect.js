// The inspector page's logic: polls the JSON endpoints with the token and draws tables and SVG
// charts. Data is only ever inserted as text (labels and kernel names come from the program).
"use strict";
const TOKEN = new URLSearchParams(location.search).get("token") || "";
const POLL_MS = 1000;
const SVG = "http://www.w3.org/2000/svg";
let selected = 0;
let lastEvent = 0;
let devices = [];

async function get(path) {
  const response = await fetch(path, { headers: { Authorization: "Bearer " + TOKEN } });
  if (!response.ok) throw new Error(path + ": HTTP " + response.status);
  return response.json();
}

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}

function bytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (Math.abs(n) >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + " " + units[i];
}

function seconds(s) {
  if (s < 1) return (s * 1000).toFixed(0) + " ms";
  if (s < 120) return s.toFixed(1) + " s";
  return (s / 60).toFixed(1) + " min";
}

function nanos(ns) {
  if (ns === null || ns === undefined) return "untimed";
  if (ns < 1e3) return ns + " ns";
  if (ns < 1e6) return (ns / 1e3).toFixed(1) + " µs";
  return (ns / 1e6).toFixed(2) + " ms";
}

function fillRows(table, rows) {
  const body = table.tBodies[0];
  body.replaceChildren(...rows.map(cells => {
    const tr = document.createElement("tr");
    for (const [text, cls] of cells) tr.appendChild(el("td", text, cls));
    return tr;
  }));
}

function drawDevices() {
  const box = document.getElementById("devices");
  box.replaceChildren(...devices.map(d => {
    const card = el("div", null, "card device" + (d.index === selected ? " selected" : ""));
    card.dataset.index = d.index;
    card.appendChild(el("div", "GPU " + d.index + ": " + (d.name || "?"), "name"));
    card.appendChild(el("div", [d.vendor, d.type].filter(Boolean).join(" · "), "muted"));
    const memory = d.global_memory_bytes ?? d.global_mem_bytes ?? d.memory_bytes;
    card.appendChild(el("div", (d.compute_units ?? "?") + " compute units · " + bytes(memory)
      + (d.initialized ? " · initialised" : " · not initialised")));
    card.onclick = () => { selected = d.index; drawDevices(); refresh(); };
    return card;
  }));
}

// A line chart: series = [{points: [[x, y]], color, label, dash}], x in seconds relative to now.
function drawChart(svg, series, format, xLabel) {
  const W = 800, H = 220, L = 70, R = 10, T = 26, B = 30;
  svg.replaceChildren();
  const all = series.flatMap(s => s.points);
  if (!all.length) {
    const t = document.createElementNS(SVG, "text");
    t.setAttribute("x", W / 2); t.setAttribute("y", H / 2); t.setAttribute("text-anchor", "middle");
    t.textContent = "no samples yet";
    svg.appendChild(t);
    return;
  }
  const xs = all.map(p => p[0]), ys = all.map(p => p[1]);
  const x0 = Math.min(...xs), x1 = Math.max(...xs, x0 + 1e-9);
  const y0 = Math.min(0, ...ys), y1 = Math.max(...ys, y0 + 1e-9) * 1.05;
  const sx = x => L + (x - x0) / (x1 - x0) * (W - L - R);
  const sy = y => H - B - (y - y0) / (y1 - y0) * (H - T - B);
  const line = (x1_, y1_, x2_, y2_, color) => {
    const l = document.createElementNS(SVG, "line");
    l.setAttribute("x1", x1_); l.setAttribute("y1", y1_);
    l.setAttribute("x2", x2_); l.setAttribute("y2", y2_);
    l.setAttribute("stroke", color); svg.appendChild(l);
  };
  const text = (x, y, s, anchor) => {
    const t = document.createElementNS(SVG, "text");
    t.setAttribute("x", x); t.setAttribute("y", y);
    if (anchor) t.setAttribute("text-anchor", anchor);
    t.textContent = s; svg.appendChild(t);
  };
  for (let i = 0; i <= 4; i++) {
    const y = y0 + (y1 - y0) * i / 4;
    line(L, sy(y), W - R, sy(y), "#eef1f5");
    text(L - 4, sy(y) + 4, format(y), "end");
  }
  text(L, H - 8, xLabel(x0));
  text(W - R, H - 8, xLabel(x1), "end");
  series.forEach((s, i) => {
    if (!s.points.length) return;
    const p = document.createElementNS(SVG, "polyline");
    p.setAttribute("points", s.points.map(q => sx(q[0]).toFixed(1) + "," + sy(q[1]).toFixed(1))
      .join(" "));
    p.setAttribute("fill", "none"); p.setAttribute("stroke", s.color);
    p.setAttribute("stroke-width", "1.8");
    if (s.dash) p.setAttribute("stroke-dasharray", "5 4");
    svg.appendChild(p);
    line(L + 10 + i * 150, 10, L + 30 + i * 150, 10, s.color);
    text(L + 34 + i * 150, 14, s.label);
  });
}

function drawState(state) {
  document.getElementById("memory-device").textContent = "GPU " + state.device;
  const summary = document.getElementById("memory-summary");
  if (!state.initialized) {
    summary.replaceChildren(el("span", "device not initialised (nothing allocated yet)", "muted"));
  } else {
    const m = state.memory;
    summary.replaceChildren(...[["in use", bytes(m.bytes_in_use)],
      ["cached", bytes(m.bytes_cached)], ["reserved", bytes(m.bytes_reserved)],
      ["peak", bytes(m.peak_bytes_reserved)], ["live buffers", m.live_buffers],
      ["pool hits / misses", m.pool_hits + " / " + m.pool_misses]].map(([k, v]) => {
      const span = el("span", k + " ");
      span.appendChild(el("b", v));
      return span;
    }));
  }
  const now = state.now;
  const pick = key => state.history.map(s => [s.t - now, s[key]]);
  drawChart(document.getElementById("memory-chart"), [
    { points: pick("bytes_in_use"), color: "#3b6fd4", label: "in use" },
    { points: pick("bytes_reserved"), color: "#e6820e", label: "reserved" },
    { points: pick("peak_bytes_reserved"), color: "#c43b3b", label: "peak", dash: true },
  ], bytes, x => seconds(-x) + " ago");
  const streams = state.streams.map(s => s.stream + " (" + s.launches + " launches)");
  document.getElementById("streams").textContent = "streams: " +
    (streams.length ? streams.join(", ") : "none seen") + " — from " + state.streams_source;
}

function drawAllocations(data) {
  document.getElementById("allocation-count").textContent = data.labelled + " labelled, "
    + data.unlabelled + " unlabelled of " + data.live_buffers + " live";
  fillRows(document.getElementById("allocations"), data.allocations.map(a => [
    [a.label], [bytes(a.bytes), "num"], [a.dtype ?? "–"], [seconds(a.age_s), "num"]]));
}

function drawKernels(data) {
  const count = document.getElementById("kernel-count");
  if (!data.available) {
    count.textContent = "(kernel log " + data.message + ")";
    fillRows(document.getElementById("kernels"), []);
    return;
  }
  count.textContent = data.total + " in the log, newest first";
  fillRows(document.getElementById("kernels"), data.entries.map(k => [
    [k.kernel], [k.entry_point], [k.stream ?? "default"], [(k.global || []).join("×")],
    [k.local ? k.local.join("×") : "auto"],
    [seconds(Math.max(0, (data.now_ns - k.queued_ns) / 1e9)) + " ago", "num"],
    [nanos(k.duration_ns), "num"]]));
}

function drawEvents(data) {
  const list = document.getElementById("events");
  for (const e of data.events) {
    lastEvent = Math.max(lastEvent, e.id);
    const li = el("li");
    li.appendChild(el("span", new Date(e.t * 1000).toLocaleTimeString() + " "));
    li.appendChild(el("span", e.kind, "kind"));
    li.appendChild(document.createTextNode(" " + e.message));
    list.prepend(li);
  }
  while (list.children.length > 200) list.lastChild.remove();
}

function drawTraining(data) {
  if (!data.reported) return;
  document.getElementById("training-section").hidden = false;
  const series = split => data.losses.filter(l => l.split === split && l.loss !== null)
    .map(l => [l.step, l.loss]);
  drawChart(document.getElementById("loss-chart"), [
    { points: series("train"), color: "#3b6fd4", label: "training" },
    { points: series("validation"), color: "#e6550d", label: "validation" },
  ], y => y.toFixed(2), x => "step " + Math.round(x));
}

async function refresh() {
  const base = "/gpus/" + selected;
  const [state, allocations, kernels, events, training] = await Promise.all([
    get(base + "/state"), get(base + "/allocations"), get(base + "/kernel_log?limit=100"),
    get("/events?since=" + lastEvent), get("/training")]);
  drawState(state); drawAllocations(allocations); drawKernels(kernels);
  drawEvents(events); drawTraining(training);
}

async function loop() {
  try {
    const gpus = await get("/gpus");
    devices = gpus.devices;
    drawDevices();
    await refresh();
    document.getElementById("status").textContent = "pid " + gpus.pid + " · updated "
      + new Date().toLocaleTimeString();
  } catch (error) {
    document.getElementById("status").textContent = "error: " + error.message;
  }
  setTimeout(loop, POLL_MS);
}
loop();
