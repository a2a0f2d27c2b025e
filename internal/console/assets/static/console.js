// sluice console: live updates over server-sent events, hand-written and
// dependency-free. The pages work without it; it only keeps them fresh.
(function () {
  "use strict";
  var live = document.getElementById("live");
  var page = document.body.getAttribute("data-page");

  // Confirm destructive forms (purge).
  document.addEventListener("submit", function (e) {
    var msg = e.target.getAttribute("data-confirm");
    if (msg && !window.confirm(msg)) { e.preventDefault(); }
  });

  if (!window.EventSource || !live) { return; }
  // The stream starts where the page was rendered (data-after, a position
  // on SLUICE_EVENTS), so an event published before it connects is not
  // lost; on a reconnect the browser sends the last event's id and the
  // stream resumes after it. Events are sent oldest first and each handler
  // below applies them idempotently: the newest one wins.
  var after = document.body.getAttribute("data-after");
  var es = new EventSource("/console/stream" + (after ? "?after=" + encodeURIComponent(after) : ""));
  es.onopen = function () { live.textContent = "● live"; live.className = "live on"; };
  es.onerror = function () { live.textContent = "● reconnecting"; live.className = "live"; };

  var refreshTimer = null;
  function later(fn, ms) {
    if (refreshTimer) { return; }
    refreshTimer = setTimeout(function () { refreshTimer = null; fn(); }, ms);
  }

  // Replace the element with id from a freshly fetched copy of url.
  function swap(url, id) {
    return fetch(url, { headers: { "Accept": "text/html" }, credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString("<div>" + html + "</div>", "text/html");
        var fresh = doc.getElementById(id);
        var cur = document.getElementById(id);
        if (fresh && cur) { cur.replaceWith(fresh); }
      })
      .catch(function () { /* the next event tries again */ });
  }

  function cell(text, cls) {
    var td = document.createElement("td");
    if (cls) { td.className = cls; }
    td.textContent = text;
    return td;
  }

  function statusBadge(s) {
    var span = document.createElement("span");
    span.className = "st st-" + s;
    span.textContent = s;
    return span;
  }

  var rank = { submitted: 1, running: 2, succeeded: 3, failed: 3, cancelled: 3 };

  function onJobsPage(ev) {
    later(function () { swap("/console/overview", "overview"); }, 800);
    var table = document.getElementById("jobs");
    if (!table) { return; }
    var want = table.dataset;
    if (want.kind && want.kind !== ev.kind) { return; }
    if (want.q && ev.job_id.indexOf(want.q) < 0) { return; }
    var row = table.querySelector('tr[data-id="' + CSS.escape(ev.job_id) + '"]');
    if (want.status && want.status !== ev.status) {
      if (row) { row.remove(); }
      return;
    }
    if (want.label) { return; } // events carry labels, but the page keeps it simple: reload to refresh
    if (want.tenant && (ev.tenant || "default") !== want.tenant) { return; }
    if (row) {
      var cur = row.querySelector(".st");
      if (cur && (rank[cur.textContent] || 0) > (rank[ev.status] || 0)) { return; }
      row.remove();
    }
    row = document.createElement("tr");
    row.setAttribute("data-id", ev.job_id);
    var id = document.createElement("td");
    id.className = "id";
    var a = document.createElement("a");
    a.href = "/console/jobs/" + encodeURIComponent(ev.job_id);
    a.textContent = ev.job_id;
    id.appendChild(a);
    row.appendChild(id);
    row.appendChild(cell(ev.kind));
    var st = document.createElement("td");
    st.appendChild(statusBadge(ev.status));
    row.appendChild(st);
    var age = cell("just now", "age");
    age.title = ev.time;
    row.appendChild(age);
    row.appendChild(cell(String(ev.attempt), "num"));
    row.appendChild(cell(ev.code || "", "code"));
    row.appendChild(cell("", "muted"));
    row.className = "fresh";
    var body = table.tBodies[0];
    body.insertBefore(row, body.firstChild);
  }

  function onJobPage(ev) {
    var job = document.getElementById("job");
    if (!job || job.getAttribute("data-id") !== ev.job_id) { return; }
    later(function () { swap(window.location.href, "main"); }, 300);
  }

  es.addEventListener("job", function (e) {
    var ev;
    try { ev = JSON.parse(e.data); } catch (err) { return; }
    if (page === "jobs" && document.getElementById("jobs")) { onJobsPage(ev); }
    else if (document.getElementById("job")) { onJobPage(ev); }
  });
})();
