// Samsa pipeline dashboard: renders the server's snapshot (see /api/state) and follows /events.
// Plain DOM and SVG, no libraries; every value is inserted as text, never as HTML.
// The page has two views as tabs, the pipeline (here) and the broker console (console.js); the
// URL's #console opens the console.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  // The namespace of the page's own <svg>, so no namespace URL has to be spelled out here.
  const SVG_NS = $("chart").namespaceURI;
  const CITY_COLORS = ["#1f4e9c", "#222831", "#0f7c6c", "#b5179e", "#7a4b1e", "#3a86ff", "#5f6b7a", "#2a9d8f"];
  const LIGHT_TEXT = new Set(["Very Unhealthy", "Hazardous"]);
  const MINUTE = 60000;

  let snap = null;
  let metric = "aqi";

  // -- helpers -------------------------------------------------------------------------------

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v;
      else e.setAttribute(k, v);
    }
    for (const c of children) {
      if (c !== null && c !== undefined) e.append(c instanceof Node ? c : String(c));
    }
    return e;
  }

  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVG_NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  const pad2 = (n) => String(n).padStart(2, "0");
  const hhmm = (ms) => { const d = new Date(ms); return pad2(d.getHours()) + ":" + pad2(d.getMinutes()); };
  const hhmmss = (ms) => hhmm(ms) + ":" + pad2(new Date(ms).getSeconds());
  const num = (x, digits) => (x === null || x === undefined ? "—" : Number(x).toFixed(digits));
  const count = (x) => (x === null || x === undefined ? "—" : Number(x).toLocaleString("en-US"));
  const rate = (x) => (x === null || x === undefined ? "—" : Number(x).toLocaleString("en-US", { maximumFractionDigits: 1 }) + " rec/s");
  const textColor = (category) => (LIGHT_TEXT.has(category) ? "#ffffff" : "#1a1a1a");

  function ago(ms) {
    if (ms === null || ms === undefined) return "never";
    const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
    if (s < 120) return s + " s ago";
    if (s < 7200) return Math.round(s / 60) + " min ago";
    return Math.round(s / 3600) + " h ago";
  }

  function badge(aqi, category, color) {
    const b = el("span", { class: "badge", "data-testid": "aqi-badge", title: category }, aqi);
    b.style.background = color;
    b.style.color = textColor(category);
    return b;
  }

  function cityColors(s) {
    const colors = new Map();
    s.cities.forEach((c, i) => colors.set(c.city, CITY_COLORS[i % CITY_COLORS.length]));
    return colors;
  }

  // -- sections ------------------------------------------------------------------------------

  function renderBanners(s) {
    const broker = $("banner-broker");
    broker.hidden = s.broker.state !== "unreachable";
    if (!broker.hidden) {
      broker.replaceChildren("Broker unreachable — retrying. ", el("span", { class: "why" }, s.broker.error || ""));
    }
    const job = $("banner-job");
    job.hidden = s.job.state === "running";
    if (s.job.state === "starting") {
      // Not an alarm: a Spark job's first micro-batch can take a minute.
      job.className = "banner info";
      job.replaceChildren("Spark job starting… ", el("span", { class: "why" }, "(" + s.job.reason + ")"));
    } else if (!job.hidden) {
      job.className = "banner warn";
      const last = s.job.last_status_ts ? " Last status " + ago(s.job.last_status_ts) + "." : "";
      job.replaceChildren("Spark job not running. ", el("span", { class: "why" }, "(" + s.job.reason + ")" + last));
    }
  }

  const JOB_STATES = { running: ["Running", "ok"], starting: ["Starting…", ""], not_running: ["Spark job not running", "bad"] };

  function renderTiles(s) {
    const box = $("tiles");
    const tiles = [];
    for (const c of s.cities) {
      const w = c.latest || c.latest_5m;
      if (!w) continue;
      const tile = el("div", { class: "tile", "data-testid": "city-tile", "data-city": c.city, "data-category": w.category },
        el("div", { class: "city", "data-testid": "city-name" }, c.city),
        el("div", { class: "aqi", "data-testid": "city-aqi" }, w.aqi),
        el("div", { class: "cat", "data-testid": "city-category" }, w.category),
        el("div", { class: "meta" }, "PM2.5 " + num(w.pm25, 1) + " µg/m³ · " + hhmm(w.window_start)),
        c.latest_5m ? el("div", { class: "meta", "data-testid": "city-aqi-5m" }, "5-min AQI " + c.latest_5m.aqi) : null);
      tile.style.background = w.color;
      tile.style.color = textColor(w.category);
      tiles.push(tile);
    }
    if (!tiles.length) tiles.push(el("p", { class: "empty" }, "Waiting for city aggregates on " + s.topics.aggregates + "…"));
    box.replaceChildren(...tiles);
  }

  function renderChart(s) {
    const root = $("chart");
    const W = Math.max(320, Math.round(root.getBoundingClientRect().width) || 900);
    const H = 300;
    const m = { l: 46, r: 28, t: 10, b: 26 };
    root.setAttribute("viewBox", `0 0 ${W} ${H}`);
    root.replaceChildren();
    const key = metric === "aqi" ? "aqi" : "pm25";
    $("chart-title").textContent = (metric === "aqi" ? "AQI" : "PM2.5 (µg/m³)") + " per city · 1-minute windows";
    const withData = s.cities.filter((c) => c.series.length);
    if (!withData.length || !s.series_window) {
      root.append(svg("text", { x: W / 2, y: H / 2, "text-anchor": "middle" }, "No 1-minute city windows yet"));
      $("legend").replaceChildren();
      return;
    }
    // The kept window (an hour), narrowed to the data while less than that has arrived.
    const x1 = s.series_window.to + MINUTE;
    const first = Math.min(...withData.map((c) => c.series[0].window_start));
    const x0 = Math.min(Math.max(s.series_window.from, first - 2 * MINUTE), x1 - 15 * MINUTE);
    const bands = s.categories.map((c) => ({
      lo: key === "aqi" ? c.aqi_low : c.pm25_low,
      hi: key === "aqi" ? c.aqi_high : c.pm25_high,
      color: c.color,
      name: c.name,
    }));
    let vmax = 0;
    for (const c of withData) for (const p of c.series) if (p[key] !== null) vmax = Math.max(vmax, p[key]);
    const top = bands.find((b) => b.hi >= vmax * 1.05 && b.hi >= bands[1].hi) || bands[bands.length - 1];
    const ymax = Math.max(top.hi, vmax);
    const X = (t) => m.l + ((t - x0) / (x1 - x0)) * (W - m.l - m.r);
    const Y = (v) => H - m.b - (v / ymax) * (H - m.t - m.b);

    for (const b of bands) {
      if (b.lo >= ymax) break;
      const r = svg("rect", { x: m.l, y: Y(Math.min(b.hi, ymax)), width: W - m.l - m.r,
        height: Y(b.lo) - Y(Math.min(b.hi, ymax)), fill: b.color, "fill-opacity": 0.22 });
      r.append(svg("title", {}, b.name));
      root.append(r);
      root.append(svg("line", { class: "grid-line", x1: m.l, x2: W - m.r, y1: Y(b.lo), y2: Y(b.lo) }));
      root.append(svg("text", { x: m.l - 6, y: Y(b.lo) + 4, "text-anchor": "end" }, String(b.lo)));
    }
    root.append(svg("text", { x: m.l - 6, y: Y(ymax) + 10, "text-anchor": "end" }, String(Math.round(ymax))));
    const step = (x1 - x0) > 30 * MINUTE ? 10 * MINUTE : 5 * MINUTE;
    for (let t = Math.ceil(x0 / step) * step; t <= x1; t += step) {
      root.append(svg("line", { class: "grid-line", x1: X(t), x2: X(t), y1: m.t, y2: H - m.b }));
      root.append(svg("text", { x: X(t), y: H - 8, "text-anchor": "middle" }, hhmm(t)));
    }
    root.append(svg("line", { class: "axis", x1: m.l, x2: W - m.r, y1: H - m.b, y2: H - m.b }));

    const colors = cityColors(s);
    const legend = [];
    for (const c of withData) {
      const color = colors.get(c.city);
      let d = "";
      let prev = null;
      for (const p of c.series) {
        if (p[key] === null) { prev = null; continue; }
        const gap = prev === null || p.window_start - prev > MINUTE;
        d += (gap ? "M" : "L") + X(p.window_start).toFixed(1) + " " + Y(p[key]).toFixed(1) + " ";
        prev = p.window_start;
      }
      root.append(svg("path", { d: d.trim(), fill: "none", stroke: color, "stroke-width": 2.5,
        "stroke-linejoin": "round", "data-city": c.city }));
      for (const p of c.series) {
        if (p[key] === null) continue;
        const dot = svg("circle", { cx: X(p.window_start), cy: Y(p[key]), r: 3, fill: color });
        dot.append(svg("title", {}, `${c.city} ${hhmm(p.window_start)}: AQI ${p.aqi}, PM2.5 ${num(p.pm25, 1)}`));
        root.append(dot);
      }
      const last = c.series[c.series.length - 1];
      const sw = el("span", { class: "swatch" });
      sw.style.background = color;
      legend.push(el("span", { "data-testid": "legend-item", "data-city": c.city }, sw,
        c.city + " " + (key === "aqi" ? last.aqi : num(last.pm25, 1))));
    }
    $("legend").replaceChildren(...legend);
  }

  function renderHealth(s) {
    const job = s.job;
    const status = job.status;
    const jobEl = $("job-state");
    const [label, tone] = JOB_STATES[job.state] || [job.state, "bad"];
    jobEl.textContent = label;
    jobEl.className = "value " + tone;
    $("job-detail").textContent = job.state === "starting"
      ? job.reason
      : status
        ? "batch " + status.batch_id + " · last status " + ago(job.last_status_ts) + " (timeout " + job.timeout_s + " s)"
        : "no pipeline_status received";
    $("ingest-rate").textContent = rate(s.health.ingest_rate);
    $("readings-topic").textContent = s.topics.readings + " (end offset " + count(s.health.readings_end_offset) + ")";
    $("lag").textContent = s.health.lag === null ? "—" : count(s.health.lag);
    $("throughput").textContent = rate(s.health.throughput);
    $("batch").textContent = status ? count(status.input_rows) + " rows" : "—";
    $("batch-detail").textContent = status
      ? num(status.duration_ms, 0) + " ms · " + num(status.processed_rows_per_second, 1) + " rows/s processed"
      : "";
    const broker = $("broker-state");
    broker.textContent = { ok: "Reachable", unreachable: "Unreachable", connecting: "Connecting…" }[s.broker.state] || s.broker.state;
    broker.className = "value " + (s.broker.state === "ok" ? "ok" : s.broker.state === "unreachable" ? "bad" : "");
    $("broker-detail").textContent = s.broker.error && s.broker.state !== "ok" ? s.broker.error : "";
    $("dlq-count").textContent = count(s.dlq.count);
    $("dlq-topic").textContent = s.topics.dlq;
    const items = s.dlq.latest.map((d) => el("li", { "data-testid": "dlq-item" },
      el("span", { class: "reason" }, d.reason),
      el("span", { class: "where" }, `${d.topic ?? "?"}[${d.partition ?? "?"}]@${d.offset ?? "?"}`)));
    if (!items.length) items.push(el("li", { class: "empty" }, "None"));
    $("dlq").replaceChildren(...items);
    $("updated").textContent = s.updated_at ? "updated " + hhmmss(s.updated_at) : "";
  }

  function renderAlerts(s) {
    const items = s.alerts.map((a) => el("li", { "data-testid": "alert", "data-city": a.city },
      badge(a.aqi, a.category, a.color),
      el("span", { class: "city" }, a.city),
      el("span", {}, a.category),
      el("span", { class: "when" }, hhmm(a.window_start) + "–" + (a.window_end ? hhmm(a.window_end) : "?"))));
    if (!items.length) items.push(el("li", { class: "empty" }, "No alerts"));
    $("alerts").replaceChildren(...items);
  }

  function renderSensors(s) {
    const rows = s.sensors.map((x) => el("tr", { "data-testid": "sensor-row", "data-sensor": x.sensor_id },
      el("td", {}, x.sensor_id),
      el("td", {}, x.city),
      el("td", { class: "num" }, num(x.lat, 3)),
      el("td", { class: "num" }, num(x.lon, 3)),
      el("td", { class: "num" }, num(x.pm25, 1)),
      el("td", { class: "num" }, badge(x.aqi, x.category, x.color)),
      el("td", {}, x.category),
      el("td", {}, hhmm(x.window_start))));
    if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: 8, class: "empty" }, "No sensor windows yet")));
    $("sensors").replaceChildren(...rows);
  }

  function renderMap(s) {
    const root = $("map");
    const W = Math.max(200, Math.round(root.getBoundingClientRect().width) || 360);
    const H = 280;
    const pad = 28;
    root.setAttribute("viewBox", `0 0 ${W} ${H}`);
    root.replaceChildren();
    const pts = s.sensors.filter((x) => x.lat !== null && x.lon !== null);
    if (!pts.length) {
      root.append(svg("text", { x: W / 2, y: H / 2, "text-anchor": "middle" }, "No sensor positions yet"));
      return;
    }
    // Equirectangular projection, longitudes shrunk by the cosine of the mean latitude.
    const k = Math.cos((pts.reduce((a, p) => a + p.lat, 0) / pts.length) * Math.PI / 180);
    const xs = pts.map((p) => p.lon * k);
    const ys = pts.map((p) => -p.lat);
    const minX = Math.min(...xs), maxX = Math.max(...xs), minY = Math.min(...ys), maxY = Math.max(...ys);
    const scale = Math.min((W - 2 * pad) / Math.max(maxX - minX, 1e-3), (H - 2 * pad) / Math.max(maxY - minY, 1e-3));
    const ox = (W - (maxX - minX) * scale) / 2, oy = (H - (maxY - minY) * scale) / 2;
    const P = (i) => [ox + (xs[i] - minX) * scale, oy + (ys[i] - minY) * scale];
    const byCity = new Map();
    pts.forEach((p, i) => {
      const [x, y] = P(i);
      const dot = svg("circle", { cx: x, cy: y, r: 6, fill: p.color, stroke: "#1d2330", "stroke-width": 1,
        "data-sensor": p.sensor_id });
      dot.append(svg("title", {}, `${p.sensor_id} (${p.city}): AQI ${p.aqi}`));
      root.append(dot);
      const c = byCity.get(p.city) || { x: 0, y: 0, n: 0, top: Infinity };
      c.x += x; c.n += 1; c.top = Math.min(c.top, y);
      byCity.set(p.city, c);
    });
    for (const [city, c] of byCity) {
      root.append(svg("text", { class: "city-label", x: c.x / c.n, y: Math.max(12, c.top - 10), "text-anchor": "middle" }, city));
    }
  }

  function render(s) {
    snap = s;
    for (const section of [renderBanners, renderTiles, renderChart, renderHealth, renderAlerts, renderSensors, renderMap]) {
      try {
        section(s);
      } catch (err) {
        console.error(section.name, err);
      }
    }
  }

  // -- live updates --------------------------------------------------------------------------

  function setConnection(state) {
    const pill = $("connection");
    pill.textContent = { live: "live", down: "reconnecting…", connecting: "connecting…" }[state];
    pill.className = "pill " + (state === "live" ? "live" : state === "down" ? "down" : "");
  }

  function connect() {
    setConnection("connecting");
    const source = new EventSource("/events");
    source.addEventListener("snapshot", (e) => {
      setConnection("live");
      render(JSON.parse(e.data));
    });
    source.onerror = () => {
      setConnection("down");
      // EventSource retries by itself unless the server answered with an error; then start over.
      if (source.readyState === EventSource.CLOSED) {
        source.close();
        setTimeout(connect, 2000);
      }
    };
  }

  // -- views: the pipeline and the broker console, as tabs (WAI-ARIA's tabs pattern) ----------

  const tabs = [...document.querySelectorAll('[role="tab"]')];

  function selectView(name, focus) {
    for (const t of tabs) {
      const on = t.dataset.view === name;
      t.setAttribute("aria-selected", String(on));
      t.tabIndex = on ? 0 : -1;
      $(t.getAttribute("aria-controls")).hidden = !on;
      if (on && focus) t.focus();
    }
    window.SamsaConsole.show(name === "console");
    if (name === "pipeline" && snap) { renderChart(snap); renderMap(snap); } // drawn to their width
    const hash = name === "console" ? "#console" : "";
    if (location.hash !== hash) history.replaceState(null, "", location.pathname + location.search + hash);
  }

  for (const t of tabs) {
    t.addEventListener("click", () => selectView(t.dataset.view, true));
    t.addEventListener("keydown", (e) => {
      const i = tabs.indexOf(t);
      const next = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: tabs.length - 1 }[e.key];
      if (next === undefined) return;
      e.preventDefault();
      selectView(tabs[(next + tabs.length) % tabs.length].dataset.view, true);
    });
  }
  window.addEventListener("hashchange", () => selectView(location.hash === "#console" ? "console" : "pipeline", false));
  selectView(location.hash === "#console" ? "console" : "pipeline", false);

  for (const b of document.querySelectorAll(".toggle button")) {
    b.addEventListener("click", () => {
      metric = b.dataset.metric;
      for (const o of document.querySelectorAll(".toggle button")) o.classList.toggle("on", o === b);
      if (snap) renderChart(snap);
    });
  }
  window.addEventListener("resize", () => { if (snap) { renderChart(snap); renderMap(snap); } });
  setInterval(() => { if (snap) { renderBanners(snap); renderHealth(snap); } }, 1000);
  connect();
})();
