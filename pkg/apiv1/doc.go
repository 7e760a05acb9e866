// Package apiv1 holds the HTTP API's (/v1) body types that the server
// (controller/api, controller) and the Go client (controller/client) share,
// so each is written once and the client does not import the controller.
// It starts with the agents page; the other list envelopes, filters and
// error codes still live on both sides and move here next.
//
// It does no I/O and no logging.
package apiv1
