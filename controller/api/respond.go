package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/axsched/ax/controller"
	"github.com/axsched/ax/pkg/apiv1"
	"github.com/axsched/ax/pkg/protocol"
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

// writeAPIError writes a apiv1.Error.
func writeAPIError(w http.ResponseWriter, status int, body apiv1.ErrorBody) {
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="ax"`)
	}
	writeJSON(w, status, apiv1.Error{Error: body})
}

// classify maps an error of the backend or of decoding to an HTTP status and
// an error body. ok=false means an internal error whose detail must not be
// shown to the caller.
func classify(err error) (int, apiv1.ErrorBody, bool) {
	fe, isField := AsFieldError(err)
	var ee *controller.ExistsError
	var me *mediaTypeError
	switch {
	case errors.As(err, &me):
		return http.StatusUnsupportedMediaType, apiv1.ErrorBody{Code: apiv1.CodeUnsupportedCT, Message: me.Error(), Field: "Content-Type"}, true
	case isField && errors.Is(fe, protocol.ErrTooLarge):
		return http.StatusRequestEntityTooLarge, apiv1.ErrorBody{Code: apiv1.CodeTooLarge, Message: fieldMessage(fe), Field: fieldOr(fe.Field, "body")}, true
	case isField:
		return http.StatusBadRequest, apiv1.ErrorBody{Code: apiv1.CodeInvalid, Message: fieldMessage(fe), Field: fieldOr(fe.Field, "body")}, true
	case errors.Is(err, protocol.ErrTooLarge):
		return http.StatusRequestEntityTooLarge, apiv1.ErrorBody{Code: apiv1.CodeTooLarge, Message: err.Error(), Field: "body"}, true
	case errors.Is(err, protocol.ErrInvalid), errors.Is(err, protocol.ErrVersion):
		return http.StatusBadRequest, apiv1.ErrorBody{Code: apiv1.CodeInvalid, Message: err.Error()}, true
	case errors.As(err, &ee):
		return http.StatusConflict, apiv1.ErrorBody{Code: apiv1.CodeExists, Message: err.Error(), Field: "idempotency_key", ID: ee.ID}, true
	case errors.Is(err, controller.ErrExists):
		return http.StatusConflict, apiv1.ErrorBody{Code: apiv1.CodeExists, Message: err.Error()}, true
	case errors.Is(err, controller.ErrNotFound):
		return http.StatusNotFound, apiv1.ErrorBody{Code: apiv1.CodeNotFound, Message: err.Error()}, true
	case errors.Is(err, controller.ErrConflict):
		return http.StatusConflict, apiv1.ErrorBody{Code: apiv1.CodeConflict, Message: err.Error()}, true
	case errors.Is(err, controller.ErrNotReady):
		return http.StatusServiceUnavailable, apiv1.ErrorBody{Code: apiv1.CodeUnavailable, Message: err.Error()}, true
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, apiv1.ErrorBody{Code: apiv1.CodeUnavailable, Message: "the controller did not answer in time; try again"}, true
	}
	return http.StatusInternalServerError, apiv1.ErrorBody{Code: apiv1.CodeInternal, Message: "internal error"}, false
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
