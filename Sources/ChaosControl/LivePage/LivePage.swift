import NIOHTTP1

/// The live page of a running run (`GET /ui`): one static HTML file with its style and script inline, embedded in the
/// binary (no build step, no CDN: it works offline). It holds no figures: it reads them from the API with the token
/// it is given (`/ui#token=…`, or asked for on a 401) and shows them as they are pushed (`GET /ui/events`, read as a
/// stream; `GET /ui/state` every 2 s where the stream fails): elapsed and planned time, the verdict so far and why,
/// the totals, connections, recovery percentiles, the first failure with the faults before it, the fault timeline
/// (the last occurrences, the next ones), the worst streams (paged and searched on the API: `GET /ui/streams`), what
/// people did, and the fleet's other agents. Its controls are the API's POSTs: pause and resume the schedule, fire a
/// fault, stop the run.
enum LivePage {
    /// The answer to `GET /ui`.
    static let response: APIResponse = {
        var response = APIResponse(status: .ok, body: html, contentType: "text/html; charset=utf-8")
        response.extraHeaders = [
            ("Cache-Control", "no-store"),
            ("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'"),
        ]
        return response
    }()

    static let html = """
        <!doctype html>
        <html lang=en><head><meta charset=utf-8><meta name=viewport content="width=device-width">
        <title>chaos: live</title>
        <style>\(style)</style></head>
        <body>
        <header><h1>chaos <span id=scenario>…</span></h1>
        <p>seed <code id=seed>…</code> <button id=copy-seed type=button>copy</button>
        · <span id=elapsed>0</span> s of <span id=planned>0</span> s <progress id=progress max=1 value=0></progress>
        · verdict so far <b id=verdict class=badge>…</b> <span id=paused class=badge hidden>schedule paused</span>
        · <span id=status>connecting…</span> (<span id=updates>0</span> updates)</p>
        <p id=reason class=note></p>
        <form id=token-form hidden>The API asks for its token: <input id=token type=password autocomplete=off aria-label=token>
        <button type=submit>use it</button></form></header>
        <section id=controls><h2>Controls</h2>
        <button id=pause type=button>pause the schedule</button> <button id=resume type=button>resume</button>
        <button id=stop type=button>stop the run</button>
        <form id=fire-form><input id=fire size=60 value='{"disconnect": {"mode": "reset"}}' aria-label="a fault as JSON">
        <button type=submit>fire this fault now</button></form>
        <p id=control-answer class=note></p></section>
        <section><h2>Messages</h2><table class=figures><tr>
        <td>sent <b id=sent>0</b></td><td>delivered <b id=delivered>0</b></td><td>ok <b id=ok>0</b></td>
        <td>lost <b id=lost>0</b></td><td>duplicated <b id=duplicated>0</b></td><td>redelivered <b id=redelivered>0</b></td>
        <td>reordered <b id=reordered>0</b></td><td>gaps <b id=gaps>0</b></td></tr></table></section>
        <section><h2>Connections and recovery</h2><table class=figures><tr>
        <td>opened <b id=connections-opened>0</b></td><td>live <b id=connections-live>0</b></td>
        <td>cut by faults <b id=connections-cut>0</b></td><td>refused <b id=connections-refused>0</b></td></tr><tr>
        <td>reconnect p50 <b id=reconnect-p50>–</b></td><td>p99 <b id=reconnect-p99>–</b></td>
        <td>resume p50 <b id=resume-p50>–</b></td><td>p99 <b id=resume-p99>–</b></td><td>never resumed <b id=never-resumed>0</b></td>
        </tr></table></section>
        <section id=failure-section hidden><h2>First failure</h2><p id=failure></p><ul id=failure-faults></ul></section>
        <section><h2>Faults</h2><p><b id=faults-applied>0</b> applied.</p>
        <h3>Next</h3><table id=next-faults><thead><tr><th>at</th><th>kind</th><th>for</th><th>proxy</th><th>what</th></tr></thead><tbody></tbody></table>
        <h3>Last</h3><table id=recent-faults><thead><tr><th>at</th><th>kind</th><th>for</th><th>proxy</th><th>connections</th><th>what</th></tr></thead><tbody></tbody></table></section>
        <section><h2>Streams</h2><p><span id=stream-count>0</span> stream-directions, the worst first.
        <input id=stream-search type=search placeholder="stream name" aria-label="search streams">
        <button id=stream-prev type=button>previous</button> <span id=stream-page>1 of 1</span>
        <button id=stream-next type=button>next</button></p>
        <table id=streams><thead><tr><th class=l>stream</th><th class=l>direction</th><th>sent</th><th>delivered</th><th>ok</th><th>lost</th>
        <th>duplicated</th><th>redelivered</th><th>reordered</th><th>gaps</th><th>delivery</th></tr></thead><tbody></tbody></table></section>
        <section><h2>What people did</h2><ul id=manual></ul></section>
        <section id=peers-section hidden><h2>The fleet's other agents</h2><ul id=peers></ul></section>
        <script>\(script)</script>
        </body></html>
        """

    static let style = """
        body{font:14px system-ui,sans-serif;margin:1em 2em;color:#222}h1{margin:.2em 0}h2{margin-top:1.2em;font-size:1.1em}
        table{border-collapse:collapse}td,th{padding:2px 8px;text-align:right;border-bottom:1px solid #ddd}
        th.l,td.l{text-align:left}.figures td{text-align:left}.badge{padding:1px 6px;border-radius:4px;background:#eee}
        .pass{background:#c8f0c8}.fail,.error{background:#f6c6c6}.inconclusive{background:#f6e6b0}.note{color:#555}
        tr.bad td{background:#fff0f0}progress{vertical-align:middle}#next-faults td:last-child,#recent-faults td:last-child{text-align:left}
        """

    static let script = """
        "use strict";
        const $ = (id) => document.getElementById(id);
        let token = new URLSearchParams(location.hash.slice(1)).get("token") || "";
        let updates = 0, page = 0, search = "", streamCount = 0;
        const headers = () => token ? {"Authorization": "Bearer " + token} : {};
        const num = (v) => typeof v === "number" ? v.toLocaleString("en-US") : String(v);
        const secs = (v) => typeof v === "number" ? v.toFixed(1) + " s" : "–";
        function text(id, value) { $(id).textContent = value; }
        function cells(row, values, left) {
          const tr = document.createElement("tr");
          values.forEach((v, i) => { const td = document.createElement("td"); td.textContent = v; if (i < left) td.className = "l"; tr.appendChild(td); });
          row.appendChild(tr); return tr;
        }
        function askForToken() { $("token-form").hidden = false; text("status", "the API asks for its token"); }
        async function api(method, path, body) {
          const answer = await fetch(path, {method, headers: Object.assign({"Content-Type": "application/json"}, headers()), body});
          if (answer.status === 401) askForToken();
          return answer;
        }
        function show(s) {
          updates += 1; text("updates", updates);
          text("scenario", s.scenario); text("seed", s.seed);
          text("elapsed", s.elapsed_s.toFixed(1)); text("planned", s.planned_s.toFixed(0));
          $("progress").value = s.planned_s > 0 ? Math.min(1, s.elapsed_s / s.planned_s) : 0;
          const verdict = $("verdict"); verdict.textContent = s.verdict; verdict.className = "badge " + s.verdict;
          text("reason", (s.verdict_reason || "") + (s.inconclusive ? " " + s.inconclusive.join(" ") : ""));
          $("paused").hidden = !s.paused;
          for (const k of ["sent", "delivered", "ok", "lost", "duplicated", "redelivered", "reordered", "gaps"]) text(k, num(s.totals[k]));
          for (const k of ["opened", "live", "cut", "refused"]) text("connections-" + k, num(s.connections[k]));
          const r = s.recovery, some = r.reconnects > 0;
          text("reconnect-p50", some ? secs(r.reconnect_p50_s) : "–"); text("reconnect-p99", some ? secs(r.reconnect_p99_s) : "–");
          text("resume-p50", some ? secs(r.resume_p50_s) : "–"); text("resume-p99", some ? secs(r.resume_p99_s) : "–");
          text("never-resumed", num(r.never_resumed));
          text("faults-applied", num(s.faults.applied));
          const next = $("next-faults").tBodies[0]; next.replaceChildren();
          for (const f of s.faults.next) cells(next, [f.at_s === undefined ? "after the pause" : secs(f.at_s), f.kind, secs(f.for_s), f.proxy || "all", f.summary], 0);
          const recent = $("recent-faults").tBodies[0]; recent.replaceChildren();
          for (const f of s.faults.recent.slice().reverse()) cells(recent, [secs(f.at_s), f.kind, secs(f.for_s), f.proxy || "all", num(f.connections), f.summary], 0);
          $("failure-section").hidden = !s.first_failure;
          if (s.first_failure) {
            const f = s.first_failure; text("failure", secs(f.at_s) + ": " + f.account);
            const list = $("failure-faults"); list.replaceChildren();
            for (const x of f.faults) { const li = document.createElement("li"); li.textContent = "before it: " + x.kind + " at " + secs(x.at_s) + " for " + secs(x.for_s); list.appendChild(li); }
          }
          const manual = $("manual"); manual.replaceChildren();
          for (const m of s.manual) { const li = document.createElement("li"); li.textContent = secs(m.at_s) + " " + m.action + (m.detail ? ": " + m.detail : ""); manual.appendChild(li); }
          $("peers-section").hidden = s.peers.length === 0;
          const peers = $("peers"); peers.replaceChildren();
          for (const p of s.peers) { const li = document.createElement("li"), a = document.createElement("a"); a.href = p + "/ui" + location.hash; a.textContent = p; li.appendChild(a); peers.appendChild(li); }
          if (s.streams.count !== streamCount) { streamCount = s.streams.count; text("stream-count", num(streamCount)); }
          loadStreams();
        }
        let loading = false;
        async function loadStreams() {
          if (loading) return; loading = true;
          try {
            const answer = await api("GET", "/ui/streams?page=" + page + "&q=" + encodeURIComponent(search));
            if (!answer.ok) return;
            const p = await answer.json(); page = p.page;
            text("stream-page", (p.page + 1) + " of " + p.pages + " (" + num(p.matching) + ")");
            const body = $("streams").tBodies[0]; body.replaceChildren();
            for (const r of p.rows) {
              const tr = cells(body, [r.stream, r.direction, num(r.sent), num(r.delivered), num(r.ok), num(r.lost), num(r.duplicated), num(r.redelivered), num(r.reordered), num(r.gaps), (r.delivery * 100).toFixed(1) + "%"], 2);
              if (r.lost + r.duplicated + r.redelivered + r.reordered + r.gaps > 0) tr.className = "bad";
            }
          } finally { loading = false; }
        }
        async function poll() {
          try { const answer = await api("GET", "/ui/state"); if (answer.ok) show(await answer.json()); } catch (e) {}
          setTimeout(poll, 2000);
        }
        async function listen() {
          try {
            const answer = await fetch("/ui/events", {headers: headers()});
            if (answer.status === 401) { askForToken(); return; }
            if (!answer.ok || !answer.body) { text("status", "no live run here (" + answer.status + ")"); return; }
            text("status", "live");
            const reader = answer.body.getReader(), decoder = new TextDecoder();
            let buffered = "";
            for (;;) {
              const {value, done} = await reader.read();
              if (done) break;
              buffered += decoder.decode(value, {stream: true});
              let end;
              while ((end = buffered.indexOf("\\n\\n")) >= 0) {
                const event = buffered.slice(0, end); buffered = buffered.slice(end + 2);
                const data = event.split("\\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\\n");
                if (data) show(JSON.parse(data));
              }
            }
            text("status", "the run ended or the stream closed; reading every 2 s");
          } catch (e) { text("status", "no stream (" + e + "); reading every 2 s"); }
          poll();
        }
        async function control(method, path, body) {
          const answer = await api(method, path, body);
          text("control-answer", method + " " + path + ": " + answer.status + " " + await answer.text());
        }
        $("pause").onclick = () => control("POST", "/schedule/pause");
        $("resume").onclick = () => control("POST", "/schedule/resume");
        $("stop").onclick = () => { if (confirm("Stop the run now? Its report is written as for Ctrl-C.")) control("POST", "/stop"); };
        $("fire-form").onsubmit = (e) => { e.preventDefault(); control("POST", "/faults", $("fire").value); };
        $("token-form").onsubmit = (e) => { e.preventDefault(); token = $("token").value; $("token-form").hidden = true; listen(); };
        window.addEventListener("hashchange", () => {
          const given = new URLSearchParams(location.hash.slice(1)).get("token");
          if (given && given !== token) { token = given; $("token-form").hidden = true; listen(); }
        });
        $("copy-seed").onclick = () => navigator.clipboard && navigator.clipboard.writeText($("seed").textContent);
        $("stream-search").oninput = (e) => { search = e.target.value; page = 0; loadStreams(); };
        $("stream-prev").onclick = () => { page = Math.max(0, page - 1); loadStreams(); };
        $("stream-next").onclick = () => { page += 1; loadStreams(); };
        listen();
        """
}
