package protocoltest

import (
	"encoding/json"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

var jobSeq atomic.Uint32 // makes the ids of jobs made in one test distinct

// NewJob makes a valid job of handler with spec, pinned to agent id, with
// payload (JSON-encoded) when it is not nil.
func NewJob(id, handler string, spec schedule.Spec, payload any) protocol.Job {
	j := protocol.Job{
		ID:        protocol.NewJobID("ctl", time.Now(), jobSeq.Add(1)*7919+rand.Uint32()%1000),
		Name:      "test job",
		Handler:   handler,
		Schedule:  spec,
		Target:    protocol.Target{Agent: id},
		CreatedAt: time.Now().UTC(),
	}
	if payload != nil {
		b, _ := json.Marshal(payload)
		j.Payload = b
	}
	return j
}

// RunCmd is the run command of attempt of j's execution scheduled at at.
func RunCmd(j protocol.Job, attempt int, at time.Time) protocol.Command {
	return protocol.Command{Kind: protocol.CmdRun, Run: &protocol.Run{Job: j, ExecID: protocol.ExecID(j.ID, at),
		Attempt: attempt, RunAt: at.UTC()}}
}

// AssignCmd is the assign command of j.
func AssignCmd(j protocol.Job) protocol.Command {
	return protocol.Command{Kind: protocol.CmdAssign, Assign: &protocol.Assign{Job: j}}
}

// ExecIDs returns the exec ids of es, in order.
func ExecIDs(es []protocol.Execution) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ExecID
	}
	return out
}
