// Package handler holds the agent's built-in handlers, exec and http. Both
// run only what the agent's own config allows — command paths (exact or
// glob) for exec, URL prefixes for http — so the controller cannot make an
// agent run arbitrary code.
//
// exec payload (JSON, unknown fields rejected):
//
//	{"command": "/usr/local/bin/sync-cache",   // absolute path, must match exec.allow
//	 "args":    ["--full"],                    // optional
//	 "stdin":   "data for the process",        // optional, written to stdin
//	 "env":     {"MODE": "fast"},              // optional, added to the environment
//	 "dir":     "/var/lib/app"}                // optional working directory
//
// The process starts with a small environment — PATH, the payload's env and
// AX_JOB_ID, AX_EXEC_ID, AX_ATTEMPT, AX_SCHEDULED_AT (RFC 3339) — not the
// agent's own, so the agent's secrets do not leak. It runs in its own
// process group; on timeout or cancel the whole group is killed with
// SIGKILL. Exit 0 is success; other codes fail, retryable unless listed in
// exec.permanent_exit_codes. The last 4 KiB of stdout and stderr are put in
// the result message. A command outside the allowlist is never started and
// fails as not retryable.
//
// http payload (JSON, unknown fields rejected):
//
//	{"method":  "POST",                          // default GET (POST when body is set)
//	 "url":     "https://api.example.com/v1/x",  // must start with an http.allow prefix
//	 "headers": {"Content-Type": "application/json"},
//	 "body":    "{\"k\":1}"}
//
// 2xx is success; 408, 425, 429, 5xx (but 501, 505) and network errors are
// retryable; other statuses are not (retry.ClassifyHTTP). Redirects are
// followed only to allowed URLs.
package handler
