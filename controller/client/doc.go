// Package client is a Go client of the ax controller's HTTP API
// (controller/api). Every method takes a context first and returns typed
// errors: an *APIError carrying the HTTP status, the error code and the
// offending field, which matches this package's sentinels (ErrNotFound,
// ErrExists, ...) and protocol.ErrInvalid / protocol.ErrTooLarge with
// errors.Is.
//
// The client imports only pkg/protocol and the standard library, so a
// program can drive ax without linking the controller.
package client
