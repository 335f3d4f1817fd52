// Samsa broker console: renders the console's view (/api/console; its fields: console.py) and
// follows /events?view=console while its tab is shown (dashboard.js calls show()). Plain DOM, no
// libraries; every value is inserted as text, never as HTML. Long lists are paged (topics and
// groups, partitions and lag rows 50 a page), and a topic's or group's detail is rendered
// only while it is expanded, so a cluster of thousands of partitions stays cheap to draw.
"use strict";

window.SamsaConsole = (() => {
  const $ = (id) => document.getElementById(id);
  const PAGE = { topics: 50, groups: 50, partitions: 50, lags: 50 };

  let view = null;
  let shown = false;
  let source = null;
  let retryTimer = null;
  const expanded = new Set(); // "topic:NAME", "group:ID"
  const pages = new Map(); // pager key -> page index
  const allConfigs = new Map(); // topic -> every config, fetched on demand
  const showAll = new Set(); // topics showing every config

  // -- helpers -------------------------------------------------------------------------------

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") e.className = v;
      else e.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children) {
      if (c !== null && c !== undefined) e.append(c instanceof Node ? c : String(c));
    }
    return e;
  }

  const td = (col, value, cls) => el("td", { "data-col": col, class: cls }, value);
  const num = (col, value) => td(col, value, "num");
  const count = (x) => (x === null || x === undefined ? "—" : Number(x).toLocaleString("en-US"));
  const list = (xs) => (xs && xs.length ? xs.join(", ") : "—");
  const pad2 = (n) => String(n).padStart(2, "0");
  const hhmmss = (ms) => { const d = new Date(ms); return pad2(d.getHours()) + ":" + pad2(d.getMinutes()) + ":" + pad2(d.getSeconds()); };

  function bytes(n) {
    if (n === null || n === undefined) return "—";
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let v = n, i = 0;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i += 1; }
    return (i === 0 ? String(v) : v.toFixed(1)) + " " + units[i];
  }

  function ago(ms) {
    if (ms === null || ms === undefined) return "never";
    const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
    return s < 120 ? s + " s ago" : s < 7200 ? Math.round(s / 60) + " min ago" : Math.round(s / 3600) + " h ago";
  }

  const pill = (text, tone) => el("span", { class: "pill " + tone }, text);

  function expander(key, label, controls) {
    const open = expanded.has(key);
    const b = el("button", { type: "button", class: "expander", "aria-expanded": String(open),
      "aria-controls": controls, "data-focus": key }, el("span", { class: "caret", "aria-hidden": "true" }, open ? "▾" : "▸"), label);
    b.addEventListener("click", () => {
      if (expanded.has(key)) expanded.delete(key); else expanded.add(key);
      render(view);
    });
    return b;
  }

  // One page of `items`, and the pager's controls (empty when everything fits on a page).
  function paged(key, items, size, what) {
    const last = Math.max(0, Math.ceil(items.length / size) - 1);
    const page = Math.min(pages.get(key) || 0, last);
    const bar = el("div", { class: "pager", "data-testid": "pager" });
    if (items.length > size) {
      const go = (p, label, disabled, dir) => {
        const b = el("button", { type: "button", disabled, "data-focus": key + ":" + dir, "aria-label": label + " page of " + what }, label);
        b.addEventListener("click", () => { pages.set(key, p); render(view); });
        return b;
      };
      bar.append(go(page - 1, "Previous", page === 0, "prev"),
        el("span", { "aria-live": "polite" }, `${what} ${count(page * size + 1)}–${count(Math.min(items.length, (page + 1) * size))} of ${count(items.length)}`),
        go(page + 1, "Next", page === last, "next"));
    }
    return [items.slice(page * size, (page + 1) * size), bar];
  }

  function table(caption, headers, rows, testid) {
    const head = el("tr", {}, ...headers.map(([h, cls]) => el("th", { scope: "col", class: cls }, h)));
    return el("div", { class: "inner-wrap" },
      el("table", { class: "inner", "data-testid": testid }, el("caption", {}, caption), el("thead", {}, head),
        el("tbody", {}, ...rows)));
  }

  // -- sections ------------------------------------------------------------------------------

  function renderHead(v) {
    $("console-cluster").textContent = v.cluster_id ? "cluster " + v.cluster_id : "";
    const polled = v.polled_at ? "polled " + hhmmss(v.polled_at) : "not polled yet";
    const took = v.poll_ms !== null && v.poll_ms !== undefined && v.state === "ok" ? " in " + count(v.poll_ms) + " ms" : "";
    $("console-polled").textContent = polled + took + " · every " + v.interval_s + " s";
    const banner = $("console-banner");
    banner.hidden = v.state === "ok";
    if (v.state === "unreachable") {
      banner.className = "banner bad";
      const asOf = v.as_of ? " · showing the last data, from " + hhmmss(v.as_of) : "";
      banner.replaceChildren("Cluster unreachable — retrying. ", el("span", { class: "why" }, (v.error || "") + asOf));
    } else if (v.state === "starting") {
      banner.className = "banner info";
      banner.replaceChildren("Asking the cluster…");
    }
    const errors = $("console-errors");
    errors.hidden = !v.errors.length;
    errors.replaceChildren("Some requests failed: ", ...v.errors.map((e) => el("span", { class: "why err" }, e)));
  }

  function renderSummary(v) {
    const s = v.summary;
    const set = (id, text, tone) => { const e = $(id); e.textContent = text; e.className = "value " + (tone || ""); };
    set("sum-brokers", s.brokers ? `${s.brokers_up} / ${s.brokers}` : "—", s.brokers_up < s.brokers ? "bad" : "ok");
    set("sum-controller", v.controller >= 0 ? "broker " + v.controller : "—");
    set("sum-topics", count(s.topics));
    set("sum-partitions", count(s.partitions));
    set("sum-urp", count(s.under_replicated), s.under_replicated ? "bad" : "ok");
    set("sum-offline", count(s.offline), s.offline ? "bad" : "ok");
    set("sum-groups", count(s.groups));
    set("sum-lag", count(s.total_lag));
  }

  function renderBrokers(v) {
    const rows = v.brokers.map((b) => el("tr", { "data-testid": "console-broker-row", "data-broker": b.id, "data-up": String(b.up) },
      el("th", { scope: "row", "data-col": "id" }, b.id),
      td("address", b.host ? `${b.host}:${b.port}` : "unknown"),
      td("status", pill(b.up ? "up" : "down", b.up ? "live" : "down")),
      td("role", b.controller ? "controller" : ""),
      num("leaders", count(b.leaders)),
      num("replicas", count(b.replicas)),
      td("urp", count(b.under_replicated), "num" + (b.under_replicated ? " bad" : "")),
      td("bytes", bytes(b.bytes), "num"),
      td("log_dirs", b.log_dirs ? b.log_dirs.map((d) => d.path + (d.error ? " (" + d.error + ")" : "")).join("; ") : "—")));
    if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: 9, class: "empty" }, "No brokers known yet")));
    $("console-brokers").replaceChildren(...rows);
  }

  function configRows(configs) {
    return configs.map((c) => el("tr", { "data-testid": "console-config-row", "data-config": c.name },
      el("th", { scope: "row" }, c.name), td("value", c.sensitive ? "(sensitive)" : c.value === null ? "null" : c.value),
      td("source", c.source)));
  }

  function topicDetail(t, cleaner) {
    const key = "topic:" + t.name;
    const [parts, bar] = paged("partitions:" + t.name, t.partitions, PAGE.partitions, "partitions");
    const compacted = cleaner.has(t.name);
    const headers = [["Partition", "num"], ["Leader", "num"], ["Replicas"], ["ISR"], ["Log start offset", "num"],
      ["High watermark", "num"], ["Size", "num"]];
    if (compacted) headers.push(["Cleaner"]);
    const rows = parts.map((p) => {
      const urp = p.isr.length < p.replicas.length;
      const row = el("tr", { "data-testid": "console-partition-row", "data-topic": t.name, "data-partition": p.partition,
        class: p.leader < 0 ? "offline" : urp ? "urp" : null },
        el("th", { scope: "row", class: "num", "data-col": "partition" }, p.partition),
        td("leader", p.leader < 0 ? "none" : p.leader, "num"),
        td("replicas", list(p.replicas)),
        td("isr", list(p.isr), urp ? "bad" : null),
        num("log_start_offset", count(p.log_start_offset)),
        num("high_watermark", count(p.high_watermark)),
        el("td", { class: "num", "data-col": "size", title: p.size === null ? null : p.size + " bytes" }, bytes(p.size)));
      if (compacted) {
        const c = cleaner.get(t.name).get(`${p.leader}:${p.partition}`);
        const cell = td("cleaner", c ? `${c.state}, dirty ${c.dirty_ratio.toFixed(2)}` : "—", c && c.state === "uncleanable" ? "bad" : null);
        if (c && c.reason) cell.title = c.reason;
        row.append(cell);
      }
      return row;
    });
    const all = allConfigs.get(t.name);
    const everything = showAll.has(t.name) && all;
    const configs = everything ? all : t.configs || [];
    const toggle = el("button", { type: "button", class: "link", "data-focus": "configs:" + t.name, "data-testid": "all-configs" },
      everything ? "Non-default only" : `Show all ${t.config_count === null ? "" : t.config_count + " "}configs`);
    toggle.addEventListener("click", async () => {
      if (showAll.has(t.name)) { showAll.delete(t.name); render(view); return; }
      try {
        const r = await fetch("/api/console/configs?topic=" + encodeURIComponent(t.name));
        if (!r.ok) throw new Error((await r.json()).error || r.statusText);
        allConfigs.set(t.name, (await r.json()).configs);
        showAll.add(t.name);
      } catch (err) {
        toggle.textContent = "Configs unavailable: " + err.message;
        return;
      }
      render(view);
    });
    const configBlock = configs.length
      ? table(everything ? "All configs" : "Non-default configs", [["Name"], ["Value"], ["Source"]], configRows(configs), "console-configs")
      : el("p", { class: "empty" }, t.configs === null ? "Configs unavailable" : "Every config has its default value");
    return el("tr", { class: "detail", id: "detail-" + key },
      el("td", { colspan: 8 },
        el("div", { class: "detail-grid" },
          el("div", {}, table(`Partitions of ${t.name}`, headers, rows, "console-partitions"), bar),
          el("div", {}, configBlock, toggle))));
  }

  function cleanerIndex(v) {
    const byTopic = new Map(); // topic -> "broker:partition" -> row
    for (const c of v.cleaner) {
      if (!byTopic.has(c.topic)) byTopic.set(c.topic, new Map());
      byTopic.get(c.topic).set(`${c.broker}:${c.partition}`, c);
    }
    return byTopic;
  }

  function renderTopics(v) {
    const filter = $("topic-filter").value.trim().toLowerCase();
    const internal = $("topic-internal").checked;
    const topics = v.topics.filter((t) => (internal || !t.internal) && (!filter || t.name.toLowerCase().includes(filter)));
    const [shownTopics, bar] = paged("topics", topics, PAGE.topics, "topics");
    const cleaner = cleanerIndex(v);
    const rows = [];
    for (const t of shownTopics) {
      const key = "topic:" + t.name;
      const configs = t.configs === null ? "unavailable"
        : t.configs.length ? t.configs.slice(0, 3).map((c) => `${c.name}=${c.sensitive ? "(sensitive)" : c.value}`).join(", ")
          + (t.configs.length > 3 ? ` +${t.configs.length - 3}` : "") : "—";
      rows.push(el("tr", { "data-testid": "console-topic-row", "data-topic": t.name, class: t.offline ? "offline" : t.under_replicated ? "urp" : null },
        el("th", { scope: "row", "data-col": "name" }, expander(key, t.name, "detail-" + key),
          t.internal ? el("span", { class: "tag", "data-testid": "internal" }, "internal") : null,
          t.error ? el("span", { class: "tag bad" }, t.error) : null),
        num("partitions", count(t.partitions.length)),
        num("replication_factor", t.replication_factor),
        td("under_replicated", count(t.under_replicated), "num" + (t.under_replicated ? " bad" : "")),
        td("offline", count(t.offline), "num" + (t.offline ? " bad" : "")),
        num("records", count(t.records)),
        el("td", { class: "num", "data-col": "size", title: t.size === null ? null : t.size + " bytes" }, bytes(t.size)),
        td("configs", configs, "configs")));
      if (expanded.has(key)) rows.push(topicDetail(t, cleaner));
    }
    if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: 8, class: "empty" }, v.topics.length ? "No topic matches" : "No topics")));
    $("console-topics").replaceChildren(...rows);
    $("topics-pager").replaceChildren(bar);
  }

  function groupDetail(g) {
    const key = "group:" + g.group_id;
    const members = g.members.map((m) => el("tr", { "data-testid": "console-member-row" },
      el("th", { scope: "row", "data-col": "client_id" }, m.client_id),
      td("host", m.host),
      td("assignment", Object.entries(m.assignment).map(([t, ps]) => `${t}: ${ps.join(", ")}`).join("; ") || "—"),
      td("member_id", m.group_instance_id ? `${m.member_id} (static: ${m.group_instance_id})` : m.member_id, "mono")));
    const [lags, bar] = paged("lags:" + g.group_id, g.partitions, PAGE.lags, "partitions");
    const lagRows = lags.map((p) => el("tr", { "data-testid": "console-lag-row", "data-topic": p.topic, "data-partition": p.partition },
      el("th", { scope: "row", "data-col": "topic" }, p.topic),
      num("partition", p.partition),
      num("committed", count(p.committed)),
      num("high_watermark", count(p.high_watermark)),
      td("lag", count(p.lag), "num" + (p.lag ? " lagging" : "")),
      td("client_id", p.client_id || "—")));
    return el("tr", { class: "detail", id: "detail-" + key },
      el("td", { colspan: 7 },
        el("div", { class: "detail-stack" },
          el("div", {}, members.length
            ? table("Members", [["Client ID"], ["Host"], ["Assignment"], ["Member ID"]], members, "console-members")
            : el("p", { class: "empty" }, "No members")),
          el("div", {}, lagRows.length
            ? table("Lag per partition", [["Topic"], ["Partition", "num"], ["Committed", "num"], ["High watermark", "num"],
              ["Lag", "num"], ["Client ID"]], lagRows, "console-lags")
            : el("p", { class: "empty" }, "No committed offsets"), bar))));
  }

  function renderGroups(v) {
    const [groups, bar] = paged("groups", v.groups, PAGE.groups, "groups");
    const rows = [];
    for (const g of groups) {
      const key = "group:" + g.group_id;
      rows.push(el("tr", { "data-testid": "console-group-row", "data-group": g.group_id },
        el("th", { scope: "row", "data-col": "group_id" }, expander(key, g.group_id, "detail-" + key),
          g.error ? el("span", { class: "tag bad" }, g.error) : null),
        td("state", g.state),
        td("protocol", g.protocol),
        td("assignor", g.assignor || "—"),
        num("coordinator", g.coordinator >= 0 ? g.coordinator : "—"),
        num("members", g.members.length),
        td("total_lag", count(g.total_lag), "num" + (g.total_lag ? " lagging" : ""))));
      if (expanded.has(key)) rows.push(groupDetail(g));
    }
    if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: 7, class: "empty" }, "No consumer groups")));
    $("console-groups").replaceChildren(...rows);
    $("groups-pager").replaceChildren(bar);
  }

  function renderCleaner(v) {
    const byBrokerTopic = new Map();
    for (const c of v.cleaner) {
      const k = c.broker + "\u0000" + c.topic;
      const a = byBrokerTopic.get(k) || { broker: c.broker, topic: c.topic, logs: 0, ratio: 0, cleans: 0, last: null,
        reclaimed: 0, cleaning: 0, uncleanable: [] };
      a.logs += 1;
      a.ratio = Math.max(a.ratio, c.dirty_ratio);
      a.cleans += c.cleans;
      a.last = c.last_clean_ms === null ? a.last : Math.max(a.last || 0, c.last_clean_ms);
      a.reclaimed += c.bytes_reclaimed;
      if (c.state === "cleaning") a.cleaning += 1;
      if (c.state === "uncleanable") a.uncleanable.push(`${c.topic}-${c.partition}: ${c.reason}`);
      byBrokerTopic.set(k, a);
    }
    const rows = [...byBrokerTopic.values()].map((a) => el("tr", { "data-testid": "console-cleaner-row", "data-broker": a.broker, "data-topic": a.topic },
      el("th", { scope: "row", class: "num", "data-col": "broker" }, a.broker),
      td("topic", a.topic),
      num("logs", a.logs),
      num("dirty_ratio", a.ratio.toFixed(2)),
      num("cleans", count(a.cleans)),
      td("last_clean", ago(a.last)),
      el("td", { class: "num", "data-col": "reclaimed", title: a.reclaimed + " bytes" }, bytes(a.reclaimed)),
      td("state", a.uncleanable.length ? `${a.uncleanable.length} uncleanable: ${a.uncleanable.join("; ")}`
        : a.cleaning ? `${a.cleaning} cleaning` : "ok", a.uncleanable.length ? "bad" : null)));
    if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: 8, class: "empty" }, "No compacted logs (or the brokers do not report their cleaner)")));
    $("console-cleaner").replaceChildren(...rows);
  }

  // -- rendering and the live stream -------------------------------------------------------------

  function render(v) {
    view = v;
    if (!shown || !v) return;
    const started = performance.now();
    const focused = document.activeElement && document.activeElement.dataset ? document.activeElement.dataset.focus : null;
    for (const section of [renderHead, renderSummary, renderBrokers, renderTopics, renderGroups, renderCleaner]) {
      try {
        section(v);
      } catch (err) {
        console.error(section.name, err);
      }
    }
    if (focused) {
      const again = document.querySelector(`[data-focus="${CSS.escape(focused)}"]`);
      if (again && !again.disabled) again.focus();
    }
    const panel = $("panel-console");
    panel.dataset.renderMs = (performance.now() - started).toFixed(1);
    panel.dataset.version = String(v.polled_at || 0);
  }

  function setConnection(state) {
    const p = $("console-connection");
    p.textContent = { live: "live", down: "reconnecting…", connecting: "connecting…" }[state];
    p.className = "pill " + (state === "live" ? "live" : state === "down" ? "down" : "");
  }

  function connect() {
    if (source) return;
    setConnection("connecting");
    source = new EventSource("/events?view=console");
    source.addEventListener("console", (e) => {
      setConnection("live");
      render(JSON.parse(e.data));
    });
    source.onerror = () => {
      setConnection("down");
      if (source && source.readyState === EventSource.CLOSED) {
        source.close();
        source = null;
        retryTimer = setTimeout(connect, 2000);
      }
    };
  }

  function disconnect() {
    clearTimeout(retryTimer);
    if (source) { source.close(); source = null; }
  }

  // While shown, the console streams (and the server polls the cluster); hidden, it does neither.
  function show(on) {
    shown = on;
    if (on) { connect(); render(view); } else disconnect();
  }

  $("topic-filter").addEventListener("input", () => { pages.set("topics", 0); render(view); });
  $("topic-internal").addEventListener("change", () => { pages.set("topics", 0); render(view); });
  setInterval(() => { if (shown && view) renderCleaner(view); }, 5000); // "N s ago" moves on

  return { show, render };
})();
