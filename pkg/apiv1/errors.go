package apiv1

// Error codes of ErrorBody.Code: a machine-readable word per kind of
// failure, fixed for /v1.
const (
	CodeInvalid       = "invalid"
	CodeNotFound      = "not_found"
	CodeExists        = "already_exists"
	CodeConflict      = "conflict"
	CodeTooLarge      = "too_large"
	CodeUnauthorized  = "unauthorized"
	CodeForbidden     = "forbidden"
	CodeUnavailable   = "unavailable"
	CodeInternal      = "internal"
	CodeNotAllowed    = "method_not_allowed"
	CodeUnsupportedCT = "unsupported_media_type"
)

// Error is the body of every HTTP API error:
// {"error":{"code":"invalid","message":"schedule.cron: ...","field":"schedule.cron"}}.
type Error struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody is the inside of Error.
type ErrorBody struct {
	// Code is one of the Code constants.
	Code    string `json:"code"`
	Message string `json:"message"`
	// Field names the offending field of the request ("schedule.cron"), if any.
	Field string `json:"field,omitempty"`
	// ID is the existing job's id on already_exists.
	ID string `json:"id,omitempty"`
}
