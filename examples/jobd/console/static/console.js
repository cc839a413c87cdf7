// jobd console: confirmations before destructive actions, the jobs
// page's selection for bulk actions, and live updates: the page subscribes
// to /console/live (server-sent events) and updates itself in place
// (counts, rates, charts, job rows, member rows, the quorum banner); it
// never reloads. Plain DOM, no framework, nothing from elsewhere.
"use strict";
(function () {
  var NS = "http://www.w3.org/2000/svg";

  function $(sel, root) { return (root || document).querySelector(sel); }
  function $all(sel, root) { return Array.prototype.slice.call((root || document).querySelectorAll(sel)); }
  function setText(el, s) { if (el && el.textContent !== s) { el.textContent = s; } }
  function ts(iso) { // the pages' time format: UTC, milliseconds
    var d = new Date(iso);
    return isNaN(d) ? "—" : d.toISOString().replace("T", " ").replace("Z", "");
  }

  // Confirmations.
  function confirms() {
    $all("form[data-confirm]").forEach(function (f) {
      f.addEventListener("submit", function (e) {
        if (!window.confirm(f.getAttribute("data-confirm"))) { e.preventDefault(); }
      });
    });
    var bulk = $("#bulk");
    if (bulk) {
      bulk.addEventListener("submit", function (e) {
        var by = e.submitter;
        if (by && by.value === "cancel" && !window.confirm(bulk.getAttribute("data-confirm-cancel"))) { e.preventDefault(); }
      });
    }
  }

  // Selection for bulk actions.
  function selection() {
    var all = $("#select-all");
    if (!all) { return; }
    function update() {
      var n = $all("input.pick:checked").length;
      setText($("#selected-count"), n + " selected");
      $("#bulk-retry").disabled = n === 0;
      $("#bulk-cancel").disabled = n === 0;
    }
    all.addEventListener("change", function () {
      $all("input.pick").forEach(function (b) { b.checked = all.checked; });
      update();
    });
    document.addEventListener("change", function (e) {
      if (e.target.classList && e.target.classList.contains("pick")) { update(); }
    });
    update();
  }

  // Charts: small SVG line charts, one point a second; a negative point
  // is a gap.
  function chart(svg, lines) {
    if (!svg) { return; }
    var W = 300, H = 100, peak = 0;
    lines.forEach(function (l) { l.points.forEach(function (v) { if (v > peak) { peak = v; } }); });
    var top = peak > 0 ? peak * 1.1 : 1;
    while (svg.firstChild) { svg.removeChild(svg.firstChild); }
    [0.25, 0.5, 0.75].forEach(function (f) {
      var g = document.createElementNS(NS, "line");
      g.setAttribute("x1", 0); g.setAttribute("x2", W); g.setAttribute("y1", H * f); g.setAttribute("y2", H * f);
      g.setAttribute("class", "grid");
      svg.appendChild(g);
    });
    lines.forEach(function (l) {
      var n = l.points.length, d = "", pen = false;
      l.points.forEach(function (v, i) {
        if (v < 0) { pen = false; return; }
        var x = n > 1 ? (i * W) / (n - 1) : 0, y = H - (v * H) / top;
        d += (pen ? "L" : "M") + x.toFixed(1) + " " + y.toFixed(1) + " ";
        pen = true;
      });
      var p = document.createElementNS(NS, "path");
      p.setAttribute("d", d || "M0 " + H);
      p.setAttribute("class", "line " + l.cls);
      svg.appendChild(p);
      l.points.forEach(function (v, i) { // a point without neighbours: a dot
        if (v < 0 || (i > 0 && l.points[i - 1] >= 0) || (i < n - 1 && l.points[i + 1] >= 0)) { return; }
        var c = document.createElementNS(NS, "circle");
        c.setAttribute("cx", n > 1 ? (i * W) / (n - 1) : 0); c.setAttribute("cy", H - (v * H) / top); c.setAttribute("r", 2.5);
        c.setAttribute("class", "dot " + l.cls);
        svg.appendChild(c);
      });
    });
    var label = document.createElementNS(NS, "text");
    label.setAttribute("x", 2); label.setAttribute("y", 9); label.setAttribute("class", "scale");
    label.textContent = "max " + (Math.round(peak * 100) / 100);
    svg.appendChild(label);
    svg.setAttribute("data-points", String(lines[0].points.filter(function (v) { return v >= 0; }).length));
  }

  function queueRow(tbody, q, states, csrf) {
    var tr = document.createElement("tr");
    tr.className = "queue";
    tr.setAttribute("data-queue", q.name);
    var td = document.createElement("td"), a = document.createElement("a");
    a.href = "/console/jobs?queue=" + encodeURIComponent(q.name);
    a.textContent = q.name;
    td.appendChild(a);
    var hint = document.createElement("div");
    hint.className = "hint"; hint.setAttribute("data-field", "hint"); hint.hidden = true;
    td.appendChild(hint);
    tr.appendChild(td);
    states.forEach(function (s) {
      var c = document.createElement("td"), l = document.createElement("a");
      c.className = "num";
      l.href = "/console/jobs?queue=" + encodeURIComponent(q.name) + "&state=" + s;
      l.setAttribute("data-state", s);
      c.appendChild(l);
      tr.appendChild(c);
    });
    ["total", "submitted", "claimed", "acked", "failed", "latency", "oldest"].forEach(function (f) {
      var c = document.createElement("td");
      c.className = "num"; c.setAttribute("data-field", f);
      tr.appendChild(c);
    });
    var act = document.createElement("td"), form = document.createElement("form");
    form.method = "post"; form.className = "inline";
    form.action = "/console/queues/" + (q.paused ? "resume" : "pause");
    [["csrf", csrf], ["queue", q.name]].forEach(function (kv) {
      var i = document.createElement("input");
      i.type = "hidden"; i.name = kv[0]; i.value = kv[1];
      form.appendChild(i);
    });
    var b = document.createElement("button");
    b.type = "submit"; b.className = q.paused ? "resume" : "pause"; b.textContent = q.paused ? "Resume" : "Pause";
    form.appendChild(b);
    act.appendChild(form);
    tr.appendChild(act);
    tbody.appendChild(tr);
    return tr;
  }

  function onStats(st) {
    setText($("#applied"), String(st.applied));
    var table = $("#queues");
    if (table) {
      var states = $all("thead th.num", table).map(function (th) { return th.textContent; });
      var csrfIn = $("input[name=csrf]");
      st.queues.forEach(function (q) {
        var tr = null;
        $all("tr.queue", table).forEach(function (r) { if (r.getAttribute("data-queue") === q.name) { tr = r; } });
        if (!tr) {
          tr = queueRow($("tbody", table), q, states.slice(0, q.counts.length), csrfIn ? csrfIn.value : "");
          table.hidden = false;
          var none = $("#no-queues");
          if (none) { none.hidden = true; }
        }
        q.counts.forEach(function (n, i) {
          setText($("a[data-state=\"" + states[i] + "\"]", tr), String(n));
        });
        ["total", "submitted", "claimed", "acked", "failed", "latency", "oldest", "hint"].forEach(function (f) {
          setText($("[data-field=\"" + f + "\"]", tr), String(q[f]));
        });
        $("[data-field=hint]", tr).hidden = !q.hint;
      });
    }
    var s = st.series;
    chart($("#chart-throughput"), [{ points: s.submitted, cls: "submitted" }, { points: s.acked, cls: "acked" }, { points: s.failed, cls: "failed" }]);
    chart($("#chart-latency"), [{ points: s.wait_p50, cls: "waitp50" }, { points: s.wait_max, cls: "waitmax" }, { points: s.run_p50, cls: "run" }]);
    chart($("#chart-lag"), [{ points: s.apply_lag, cls: "applylag" }, { points: s.follower_lag, cls: "followerlag" }]);
  }

  function onHealth(h) {
    var b = $("#quorum-banner");
    if (b) {
      setText(b, h.banner);
      b.hidden = !h.banner;
    }
    setText($("#self-role"), h.role);
    var who = $("#self-leader");
    if (who) {
      while (who.firstChild) { who.removeChild(who.firstChild); }
      if (h.leader !== h.self) {
        who.appendChild(document.createTextNode(" · "));
        var l = document.createElement("b");
        l.textContent = h.leader ? "leader " + h.leader : "no leader known";
        if (!h.leader) { l.className = "bad"; }
        who.appendChild(l);
      }
    }
    var line = $("#quorum-line");
    if (line) {
      setText(line, h.reachable.length + " of " + h.voters.length + " voters reachable from this member (a quorum needs " + h.need + ").");
      line.className = h.quorum ? "ok" : "bad";
    }
    (h.members || []).forEach(function (m) {
      var tr = null;
      $all("#members tr.member").forEach(function (r) { if (r.getAttribute("data-id") === m.id) { tr = r; } });
      if (!tr) { return; } // a member added since: the page's add form says so
      tr.setAttribute("data-up", String(m.up));
      tr.setAttribute("data-role", m.role);
      tr.classList.toggle("down", !m.up);
      var up = $("td.up", tr);
      while (up.firstChild) { up.removeChild(up.firstChild); }
      var sp = document.createElement("span");
      sp.className = m.up ? "ok" : "bad"; sp.textContent = m.up ? "up" : "down";
      up.appendChild(sp);
      setText($("[data-field=role]", tr), m.up ? m.role : "—");
      ["term", "commit", "applied", "last"].forEach(function (f) { setText($("[data-field=" + f + "]", tr), m.up ? String(m[f]) : ""); });
      setText($("[data-field=lag]", tr), m.up && m.lag_known ? String(m.lag) : "");
      setText($("[data-field=catchup]", tr), m.catch_up);
      var pr = $(".progress", tr);
      pr.hidden = m.progress < 0;
      if (m.progress >= 0) {
        $("progress", pr).value = Math.round(m.progress * 100);
        setText($("[data-field=pct]", pr), Math.round(m.progress * 100) + "%");
        setText($("[data-field=eta]", pr), m.eta);
      }
    });
  }

  // The jobs page: a changed job's row moves to the top (newest first);
  // a new job that matches the filter comes in there (first page only).
  function onJobRow(ev) {
    var table = $("#jobs");
    if (!table || !ev.job) { return; }
    var tbody = $("tbody", table), tr = null;
    $all("tr.job", tbody).forEach(function (r) { if (r.getAttribute("data-id") === ev.job) { tr = r; } });
    var want = table.getAttribute("data-state"), kind = table.getAttribute("data-kind"), key = table.getAttribute("data-key");
    var matches = (!want || ev.state === want) && (!kind || ev.job_kind === kind);
    if (!tr) {
      if (table.getAttribute("data-first") !== "true" || !matches || key || ev.kind === "swept") { return; }
      tr = document.createElement("tr");
      tr.className = "job";
      tr.setAttribute("data-id", ev.job);
      var cells = [];
      for (var i = 0; i < 8; i++) { cells.push(document.createElement("td")); tr.appendChild(cells[i]); }
      var box = document.createElement("input");
      box.type = "checkbox"; box.name = "id"; box.value = ev.job; box.className = "pick"; box.setAttribute("form", "bulk");
      cells[0].appendChild(box);
      var a = document.createElement("a");
      a.href = "/console/job?id=" + encodeURIComponent(ev.job); a.textContent = ev.job;
      cells[1].appendChild(a);
      cells[2].textContent = ev.job_kind || "";
      var st = document.createElement("span");
      cells[3].appendChild(st);
      cells[4].className = "num";
      cells[7].className = "err";
      table.hidden = false;
      var none = $("#no-jobs");
      if (none) { none.hidden = true; }
    }
    var badge = $("td:nth-child(4) span", tr);
    badge.className = "state " + (ev.state || "");
    setText(badge, ev.state || "");
    if (ev.attempt !== undefined) {
      var att = $("td:nth-child(5)", tr), max = att.textContent.split("/")[1];
      setText(att, String(ev.attempt || 0) + (max ? "/" + max : ""));
    }
    setText($("td:nth-child(7)", tr), ts(ev.time));
    tr.classList.toggle("left", !matches);
    tr.title = matches ? "" : "no longer matches the filter: now " + ev.state;
    tr.classList.add("live");
    if (table.getAttribute("data-first") === "true") { tbody.insertBefore(tr, tbody.firstChild); }
  }

  // The job page: the state badge, and the event appended to the table.
  function onJobPage(ev) {
    var badge = $("#job-state");
    if (badge && ev.state) {
      badge.className = "state " + ev.state;
      setText(badge, ev.state);
    }
    var table = $("#events");
    if (!table) { return; }
    var tr = document.createElement("tr");
    tr.className = "event live";
    [[ev.index, "num"], [ts(ev.time)], [ev.kind], [ev.state || ""], [ev.attempt || 0, "num"], [ev.token || ""], [ev.worker || ""]].forEach(function (c) {
      var td = document.createElement("td");
      td.textContent = String(c[0]);
      if (c[1]) { td.className = c[1]; }
      tr.appendChild(td);
    });
    $("tbody", table).appendChild(tr);
    table.hidden = false;
    var none = $("#no-events");
    if (none) { none.hidden = true; }
  }

  function live() {
    var page = document.body.getAttribute("data-live");
    var status = $("#live-status");
    if (!page || !window.EventSource) {
      setText(status, "");
      return;
    }
    var q = document.body.getAttribute("data-live-query");
    var src = new EventSource("/console/live?page=" + encodeURIComponent(page) + (q ? "&" + q : ""));
    window.jobdLive = { events: 0, open: false };
    function mark(s, cls) { setText(status, s); status.className = "live " + cls; }
    src.addEventListener("open", function () { window.jobdLive.open = true; mark("● live", "on"); });
    src.addEventListener("error", function () {
      window.jobdLive.open = false;
      if (src.readyState === EventSource.CLOSED) {
        mark("live updates stopped (log in again?)", "off");
      } else {
        mark("reconnecting…", "off");
      }
    });
    function on(name, fn) {
      src.addEventListener(name, function (e) {
        window.jobdLive.events++;
        fn(JSON.parse(e.data));
      });
    }
    on("stats", onStats);
    on("health", onHealth);
    on("job", page === "job" ? onJobPage : onJobRow);
    on("resync", function (r) { mark("fell behind the event stream (" + r.reason + "): reopen the page", "off"); src.close(); });
  }

  document.addEventListener("DOMContentLoaded", function () {
    confirms();
    selection();
    live();
  });
})();
