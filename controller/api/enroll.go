package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/axsched/ax/controller/auth"
	"github.com/axsched/ax/pkg/apiv1"
	"github.com/axsched/ax/pkg/protocol"
)

// Enroller issues and revokes agent identities on the NATS server.
// *controller.Controller implements it; a Backend without it answers
// 501 on the enroll and revoke routes.
type Enroller interface {
	// EnrollAgent issues agent id its NATS identity and returns it with its seed, once.
	EnrollAgent(ctx context.Context, id string, req auth.EnrollRequest) (auth.Enrollment, error)
	// RevokeAgent removes agent id's identity and closes its connection.
	RevokeAgent(ctx context.Context, id string) (auth.Agent, error)
}

// Labeler changes an agent's labels. *controller.Controller implements
// it; a Backend without it answers 501 on the label route.
type Labeler interface {
	// LabelAgent sets and removes labels of agent id and places it again.
	LabelAgent(ctx context.Context, id string, ch protocol.LabelChange) (protocol.AgentInfo, error)
}

// agentAction serves POST /v1/agents/{id}:enroll, :revoke and :label.
// The enroll response carries the agent's seed: it is sent with
// Cache-Control: no-store and appears in no log (the audit line names
// the action and the caller only).
func (s *server) agentAction(w http.ResponseWriter, r *http.Request) {
	id, action, ok := splitAction(r.PathValue("idaction"))
	if !ok {
		writeAPIError(w, http.StatusNotFound, apiv1.ErrorBody{Code: apiv1.CodeNotFound,
			Message: "use POST /v1/agents/{id}:enroll, :revoke or :label"})
		return
	}
	noteAudit(r, "agent."+action, "", "")
	if action != "enroll" && action != "revoke" && action != "label" {
		noteAudit(r, "agent.unknown_action", "", "")
		writeAPIError(w, http.StatusNotFound, apiv1.ErrorBody{Code: apiv1.CodeNotFound, Field: "action",
			Message: "action: unknown agent action " + strconv.Quote(action) + " (use :enroll, :revoke or :label)"})
		return
	}
	if err := protocol.ValidateName("id", id); err != nil {
		s.fail(w, r, err)
		return
	}
	if action == "label" {
		s.labelAgent(w, r, id)
		return
	}
	en, ok := s.b.(Enroller)
	if !ok {
		writeAPIError(w, http.StatusNotImplemented, apiv1.ErrorBody{Code: apiv1.CodeInternal,
			Message: "this controller does not issue agent identities"})
		return
	}
	if action == "revoke" {
		a, err := en.RevokeAgent(r.Context(), id)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, a)
		return
	}
	req, err := decodeEnroll(w, r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	e, err := en.EnrollAgent(r.Context(), id, req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, e)
}

// decodeEnroll reads the optional enroll body: no body is an empty request.
func decodeEnroll(w http.ResponseWriter, r *http.Request) (auth.EnrollRequest, error) {
	var req auth.EnrollRequest
	if r.ContentLength == 0 && r.Header.Get("Content-Type") == "" {
		return req, nil
	}
	body, err := readBody(w, r)
	if err != nil {
		return req, err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, invalidf("body", "not an enroll request {labels, rotate}: %v", err)
	}
	if dec.More() {
		return req, invalidf("body", "trailing data after the JSON object")
	}
	if err := protocol.ValidateLabels("labels", req.Labels); err != nil {
		return req, err
	}
	return req, nil
}

// labelAgent serves POST /v1/agents/{id}:label with a protocol.LabelChange
// body; it answers the agent with its new labels.
func (s *server) labelAgent(w http.ResponseWriter, r *http.Request, id string) {
	lb, ok := s.b.(Labeler)
	if !ok {
		writeAPIError(w, http.StatusNotImplemented, apiv1.ErrorBody{Code: apiv1.CodeInternal,
			Message: "this controller does not change agent labels"})
		return
	}
	body, err := readBody(w, r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ch, err := protocol.DecodeLabelChange(body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	a, err := lb.LabelAgent(r.Context(), id, ch)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, a)
}
