// The console's script: polling of live parts, the replay and purge
// dialog, the live tail. No framework, no build step.
"use strict";
(function () {
  const csrf = document.querySelector('meta[name="csrf"]').content;
  const get = (url) => fetch(url, { headers: { "X-Toolpool-Csrf": csrf }, credentials: "same-origin" });

  // Parts with data-poll are replaced by a fresh server-rendered
  // fragment about once a second (data-every: milliseconds) while the
  // page is visible.
  for (const el of document.querySelectorAll("[data-poll]")) {
    const url = el.dataset.poll;
    const every = Math.max(+el.dataset.every || 1000, 1000);
    const tick = async () => {
      if (!document.hidden) {
        try {
          const r = await get(url);
          if (r.ok) el.innerHTML = await r.text(); // the server escaped it (html/template)
        } catch (e) { /* the next tick tries again */ }
      }
      setTimeout(tick, every);
    };
    setTimeout(tick, every);
  }

  const all = document.getElementById("check-all");
  if (all) all.addEventListener("change", () => {
    for (const c of document.querySelectorAll('#letters input[name="seq"]')) c.checked = all.checked;
  });

  // The replay and purge dialog.
  const dlg = document.getElementById("act-dialog");
  const sel = document.getElementById("selection");
  if (dlg && sel) {
    const $ = (id) => document.getElementById(id);
    let act = "", scope = "";
    const form = new FormData();
    const chosen = () => [...sel.querySelectorAll('input[name="seq"]')].filter((c) => c.type === "hidden" || c.checked).map((c) => c.value);
    for (const b of sel.querySelectorAll("button[data-act]")) {
      b.addEventListener("click", () => {
        act = b.dataset.act; scope = b.dataset.scope;
        const seqs = chosen();
        $("act-error").textContent = "";
        $("act-progress").hidden = true;
        $("act-go").disabled = false;
        $("act-calls").tBodies[0].replaceChildren();
        $("act-title").textContent = (act === "replay" ? "Replay " : "Purge ") + (scope === "all" ? "all matching dead letters" : seqs.length + " dead letter" + (seqs.length === 1 ? "" : "s"));
        $("act-what").textContent = scope === "all"
          ? "Every dead letter the filter matches, up to sequence " + sel.dataset.upto + " (what this listing saw)."
          : "Sequences " + seqs.join(", ");
        $("act-replay").hidden = act !== "replay";
        $("act-purge").hidden = act !== "purge";
        $("confirm").value = "";
        if (scope === "selected" && seqs.length === 0) { $("act-error").textContent = "Select dead letters first."; $("act-go").disabled = true; }
        dlg.showModal();
      });
    }
    $("act-close").addEventListener("click", () => { dlg.close(); if ($("act-progress").hidden === false) location.reload(); });
    $("act-go").addEventListener("click", async () => {
      const body = new URLSearchParams();
      body.set("csrf", csrf);
      if (scope === "all") {
        for (const i of sel.querySelectorAll('input[type="hidden"]')) if (i.name !== "seq") body.set(i.name, i.value);
        body.set("all", "1");
      } else {
        for (const s of chosen()) body.append("seq", s);
      }
      const f = new FormData($("act-form"));
      if (act === "replay") { body.set("rate", f.get("rate")); body.set("wait", f.get("wait")); } else body.set("confirm", f.get("confirm"));
      const r = await fetch("/ui/dlq/" + act, { method: "POST", body, credentials: "same-origin", headers: { "X-Toolpool-Csrf": csrf } });
      const j = await r.json().catch(() => ({ error: "HTTP " + r.status }));
      if (!r.ok) { $("act-error").textContent = j.error; return; }
      $("act-go").disabled = true;
      $("act-progress").hidden = false;
      poll(j.job);
    });
    const poll = async (id) => {
      const r = await get("/ui/jobs/" + id);
      const j = await r.json();
      $("act-bar").max = Math.max(j.total, 1); $("act-bar").value = j.done;
      let s = j.state + ": " + j.done + " of " + j.total;
      if (j.kind === "replay") s += " (replayed " + j.replayed + ", skipped " + j.skipped + ", ok " + j.ok + ", failed " + j.failed + ")";
      else s += " (deleted " + j.deleted + ")";
      if (j.error) s += " — " + j.error;
      $("act-state").textContent = s;
      const tb = $("act-calls").tBodies[0];
      tb.replaceChildren(...j.calls.map((c) => row([c.seq, c.tool, c.new_id || "", c.outcome, c.detail || ""], "outcome-" + c.outcome.replace(" ", "_"))));
      if (j.state !== "done" && j.state !== "failed") setTimeout(() => poll(id), 500);
      else dlg.dataset.done = j.state;
    };
  }

  function row(cells, cls) {
    const tr = document.createElement("tr");
    if (cls) tr.className = cls;
    for (const c of cells) { const td = document.createElement("td"); td.textContent = String(c); tr.appendChild(td); }
    return tr;
  }

  // linkCell is a cell with a link to href (the console's own pages, or a
  // trace URL the server built from its template), or empty.
  function linkCell(href, text, cls) {
    const td = document.createElement("td");
    td.className = cls;
    if (href && (href.startsWith("/ui/") || /^https?:\/\//.test(href))) {
      const a = document.createElement("a");
      a.href = href; a.textContent = text.length > 24 ? text.slice(0, 24) + "…" : text;
      if (!href.startsWith("/ui/")) a.rel = "noreferrer";
      td.appendChild(a);
    }
    return td;
  }

  // The live tail: results after the last seen, filtered, pausable.
  const tail = document.getElementById("tail");
  if (tail) {
    let after = 0, paused = false;
    const filters = document.getElementById("tail-filters");
    const given = new URLSearchParams(location.search); // a link may carry the filters
    for (const el of filters.elements) if (el.name && given.has(el.name)) el.value = given.get(el.name);
    const body = tail.tBodies[0];
    const btn = document.getElementById("tail-pause");
    btn.addEventListener("click", () => { paused = !paused; btn.textContent = paused ? "Resume" : "Pause"; document.getElementById("tail-state").textContent = paused ? "paused" : "following"; });
    filters.addEventListener("change", () => { after = 0; body.replaceChildren(); });
    // While paused the table stays as it is; the polls go on and only
    // count what waits (data-waiting), shown on Resume.
    const tick = async () => {
      if (!document.hidden) {
        const q = new URLSearchParams(new FormData(filters)); q.set("after", after);
        try {
          const r = await get("/ui/tail.json?" + q);
          if (r.ok) {
            const j = await r.json();
            if (j.last < after) after = 0;
            else if (paused) tail.dataset.waiting = j.results.length;
            else {
              after = j.last;
              tail.dataset.waiting = 0;
              for (const e of j.results) {
                const tr = row([e.at, e.tool, e.tenant || "-", e.class, e.code || "", e.worker || "", e.attempts || "", e.exec_ms.toFixed(2) + " ms"], "class-" + e.class);
                tr.appendChild(linkCell(e.key ? "/ui/calls/" + encodeURIComponent(e.key) : "", e.call_id || e.key || "", "call"));
                tr.appendChild(linkCell(e.trace || "", e.trace ? "trace" : "", "trace"));
                body.prepend(tr);
              }
              while (body.rows.length > 500) body.deleteRow(-1);
            }
          }
        } catch (e) { /* the next tick tries again */ }
      }
      setTimeout(tick, 1000);
    };
    tick();
  }
})();
