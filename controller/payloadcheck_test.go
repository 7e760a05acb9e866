package controller

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// TestPayloadCheckedOnCreateAndUpdate: the payload of an exec or http job
// is checked as the agent will decode it, on create and on update (where a
// refused update leaves the job as it was); a Go handler's payload is its
// own business and passes as it is.
func TestPayloadCheckedOnCreateAndUpdate(t *testing.T) {
	c := newTestController(t)
	ctx := tctx(t)
	job := protocol.Job{Name: "valve", Handler: "exec", Payload: json.RawMessage(`{"command":"/opt/valve/bin/push"}`),
		Schedule: schedule.Spec{Every: "1m"}, Target: protocol.Target{Agent: "edge-7"}}
	made, err := c.CreateJob(ctx, job)
	if err != nil {
		t.Fatalf("a good exec job refused: %v", err)
	}
	bad := made
	bad.Payload = json.RawMessage(`{"comand":"/opt/valve/bin/push"}`)
	_, err = c.UpdateJob(ctx, made.ID, bad)
	var fe *protocol.FieldError
	if !errors.As(err, &fe) || fe.Field != "payload" || !errors.Is(err, protocol.ErrInvalid) {
		t.Fatalf("update with a misspelt field: %v, want a field error on payload", err)
	}
	got, err := c.GetJob(ctx, made.ID)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Payload) != `{"command":"/opt/valve/bin/push"}` || got.Generation != made.Generation {
		t.Fatalf("a refused update changed the job: payload %s generation %d", got.Payload, got.Generation)
	}
	custom := protocol.Job{Name: "pump", Handler: "pump", Payload: json.RawMessage(`{"rpm":900,"anything":[1]}`),
		Schedule: schedule.Spec{Every: "1m"}, Target: protocol.Target{Agent: "edge-7"}}
	if _, err := c.CreateJob(ctx, custom); err != nil {
		t.Fatalf("a Go handler's payload refused: %v", err)
	}
}
