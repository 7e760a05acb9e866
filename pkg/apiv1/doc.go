// Package apiv1 holds the HTTP API's (/v1) body types that the server
// (controller/api, controller) and the Go client (controller/client)
// share, so that each is written once and the client links neither the
// controller nor nats-server:
//
//   - errors.go: the error body ({"error":{"code",...}}) and its codes;
//   - lists.go: the list envelopes (jobs, executions), the page sizes, and
//     the batch create body, answer and bounds;
//   - agents.go: the agents page and its counts;
//   - enroll.go: the enrollment request and answers.
//
// A field is only ever added to these types (with omitempty where an older
// peer may lack it); a rename or removal is a new API version.
//
// It does no I/O and no logging.
package apiv1
