package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/axsched/ax/controller"
	"github.com/axsched/ax/pkg/protocol"
)

// Error codes of protocol.APIErrorBody.Code.
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

// writeJSON writes v as the JSON body with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// writeAPIError writes a protocol.APIError.
func writeAPIError(w http.ResponseWriter, status int, body protocol.APIErrorBody) {
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="ax"`)
	}
	writeJSON(w, status, protocol.APIError{Error: body})
}

// classify maps an error of the backend or of decoding to an HTTP status and
// an error body. ok=false means an internal error whose detail must not be
// shown to the caller.
func classify(err error) (int, protocol.APIErrorBody, bool) {
	fe, isField := AsFieldError(err)
	var ee *controller.ExistsError
	var me *mediaTypeError
	switch {
	case errors.As(err, &me):
		return http.StatusUnsupportedMediaType, protocol.APIErrorBody{Code: CodeUnsupportedCT, Message: me.Error(), Field: "Content-Type"}, true
	case isField && errors.Is(fe, protocol.ErrTooLarge):
		return http.StatusRequestEntityTooLarge, protocol.APIErrorBody{Code: CodeTooLarge, Message: fieldMessage(fe), Field: fieldOr(fe.Field, "body")}, true
	case isField:
		return http.StatusBadRequest, protocol.APIErrorBody{Code: CodeInvalid, Message: fieldMessage(fe), Field: fieldOr(fe.Field, "body")}, true
	case errors.Is(err, protocol.ErrTooLarge):
		return http.StatusRequestEntityTooLarge, protocol.APIErrorBody{Code: CodeTooLarge, Message: err.Error(), Field: "body"}, true
	case errors.Is(err, protocol.ErrInvalid), errors.Is(err, protocol.ErrVersion):
		return http.StatusBadRequest, protocol.APIErrorBody{Code: CodeInvalid, Message: err.Error()}, true
	case errors.As(err, &ee):
		return http.StatusConflict, protocol.APIErrorBody{Code: CodeExists, Message: err.Error(), Field: "idempotency_key", ID: ee.ID}, true
	case errors.Is(err, controller.ErrExists):
		return http.StatusConflict, protocol.APIErrorBody{Code: CodeExists, Message: err.Error()}, true
	case errors.Is(err, controller.ErrNotFound):
		return http.StatusNotFound, protocol.APIErrorBody{Code: CodeNotFound, Message: err.Error()}, true
	case errors.Is(err, controller.ErrConflict):
		return http.StatusConflict, protocol.APIErrorBody{Code: CodeConflict, Message: err.Error()}, true
	case errors.Is(err, controller.ErrNotReady):
		return http.StatusServiceUnavailable, protocol.APIErrorBody{Code: CodeUnavailable, Message: err.Error()}, true
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, protocol.APIErrorBody{Code: CodeUnavailable, Message: "the controller did not answer in time; try again"}, true
	}
	return http.StatusInternalServerError, protocol.APIErrorBody{Code: CodeInternal, Message: "internal error"}, false
}

// fieldMessage is "field: reason"; an error about no field in particular is
// about the request body.
func fieldMessage(fe *protocol.FieldError) string {
	if fe.Field == "" {
		return "body: " + fe.Reason
	}
	return fe.Error()
}

func fieldOr(f, def string) string {
	if f == "" {
		return def
	}
	return f
}

// fail writes err as an APIError. Internal errors are logged here, once,
// with the request id that the response carries; the caller sees a generic
// message.
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, body, ok := classify(err)
	if !ok {
		rid := requestID(r.Context())
		if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
			// The caller went away; nobody reads the answer.
			s.log.Debug("api request cancelled", "method", r.Method, "path", r.URL.Path, "request_id", rid)
		} else {
			s.log.Error("api internal error", "method", r.Method, "path", r.URL.Path, "request_id", rid, "err", err)
		}
		body.Message = "internal error (request id " + rid + ")"
	}
	if rec := auditFrom(r.Context()); rec != nil {
		rec.errCode = body.Code
	}
	if status == http.StatusRequestEntityTooLarge {
		s.rejected.WithLabelValues(RejectTooLarge).Inc()
	}
	writeAPIError(w, status, body)
}
