// Package handler holds what a handler is — a Func from a Task (one
// attempt) to a Result — the Registry the agent runs attempts from, and
// the built-in handlers, exec and http, registered there like any Go
// handler. Both run only what the agent's own config allows — command
// paths (exact or glob) and environment names for exec, URLs for http —
// so the controller cannot make an agent run arbitrary code. Each returns a Result that says
// its outcome (success or failure) explicitly; the code is information only.
//
// Both payloads are decoded and checked by pkg/payload, which the
// controller also runs when a job is created or updated; the allow lists
// are checked here, where the job runs.
//
// exec payload (JSON, unknown fields rejected):
//
//	{"command": "/usr/local/bin/sync-cache",   // absolute path, must match exec.allow
//	 "args":    ["--full"],                    // optional
//	 "stdin":   "data for the process",        // optional, written to stdin
//	 "env":     {"MODE": "fast"},              // optional; every name must be in exec.env_allow
//	 "dir":     "/var/lib/app"}                // optional working directory
//
// The process starts with a small environment — PATH (always DefaultPath),
// the payload's env and AX_JOB_ID, AX_EXEC_ID, AX_ATTEMPT, AX_EPOCH,
// AX_SCHEDULED_AT (RFC 3339) — not the agent's own, so the agent's secrets
// do not leak. exec.env_allow is empty by default, so a payload env is
// refused; names that make a shell, an interpreter or the dynamic linker
// run other code (PATH, IFS, ENV, BASH_ENV, BASH_*, LD_*, PERL*, PYTHON*,
// ...: CheckEnvAllowName) cannot be listed. A value holding NUL or
// starting with "()" (a bash function) is refused too. The process runs in
// its own process group; on timeout or cancel the whole group is killed
// with SIGKILL. Exit 0 is success; other codes fail, retryable unless
// listed in exec.permanent_exit_codes. The last 4 KiB of stdout and stderr
// are put in the result message. A command outside exec.allow or an env
// name outside exec.env_allow is never started and fails as not
// retryable, the message naming it.
//
// http payload (JSON, unknown fields rejected):
//
//	{"method":  "POST",                          // default GET (POST when body is set)
//	 "url":     "https://api.example.com/v1/x",  // must be admitted by http.allow
//	 "headers": {"Content-Type": "application/json"},
//	 "body":    "{\"k\":1}"}
//
// An http.allow entry admits URLs with its scheme, host and port (80 and
// 443 when omitted; host case-insensitive) and a path below its own by
// whole segments: "https://h/v1" admits /v1, /v1/ and /v1/x, "https://h/v1/"
// only /v1/ and below, neither admits /v10. Entries that are ambiguous
// (no scheme, user info, query, fragment, wildcard, percent-encoding, dot
// or empty segments, other schemes) are refused at load: CheckAllowURL.
// A URL with user info, a dot segment or an encoded '/' or '\' in its
// path is refused.
//
// 2xx is success; 408, 425, 429, 5xx (but 501, 505) and network errors are
// retryable; other statuses are not (retry.ClassifyHTTP). A retryable
// response's Retry-After (seconds, or a date taken against its Date
// header) is returned as Result.RetryAfter. Redirects are followed (at most
// 5) only to URLs http.allow admits; a redirect elsewhere, like a refused
// URL, an invalid header name or a header value with a control character,
// fails as not retryable.
package handler
