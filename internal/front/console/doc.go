// Package console is the operators' web console, served by the
// orchestrator at /ui (Path): an overview of every tool (queued, running,
// waiting on a limit, calls per second, results by class, p50/p99
// execution time, dead letters, paused, workers and slots) and of the
// pool's health; a page per tool (recent failures with the words the model
// read, workers, consumer state, pause and resume, its catalog entry); the
// dead letters (filters, paging by stream sequence, each entry's attempts
// and the model's last words, replay and purge as background jobs); a
// tail of recent results; the calls held for approval, approved or
// denied by the operator (Config.Approvals); and the budgets' spending
// and the result cache's counts on the overview (Config.Budgets,
// Config.CacheCounts).
//
// Pages are server-rendered html/template with a little vanilla script,
// embedded in the binary (go:embed): no CDN, no build step. Replays and
// purges go through package dlq, the code the CLI's dlq commands run;
// pauses through ops.PauseTool and ops.ResumeTool.
//
// Access: operators log in with an operator token (Tokens, separate from
// agents' API keys) and get a session cookie (HttpOnly, SameSite=Strict);
// without tokens the console is open only on a loopback address (or with
// Config.InsecureNoAuth). Logins are throttled per client address (the
// TCP peer's): a few unknown tokens, then 429 with Retry-After. Static
// files are served by name, never as a directory listing. Every
// state-changing request is a POST from a
// page of the console itself (httpapi.SameOrigin) carrying the session's
// CSRF token; the Host check is the HTTP server's gate (httpapi.Server),
// which the console is served behind. Every replay, purge, pause,
// resume and approval decision is logged with the operator's name. Catalog entries and dead
// letters are rendered through explicit allow-lists of fields: webhook
// headers, credentials and environments never reach a page.
package console
