package apiv1

import (
	"fmt"
	"time"

	"github.com/axsched/ax/pkg/protocol"
)

// EnrolledAgent is an enrolled agent: its id and NATS public key (the
// body of GET /v1/agents/{id}:enrollment and of a revoke). The seed is
// never stored by the controller.
type EnrolledAgent struct {
	// ID is the agent id (protocol.ValidateName).
	ID string `json:"id"`
	// PublicKey is the agent's NKey user public key ("U…").
	PublicKey string `json:"public_key"`
	// Labels are recorded at enrollment (informational; the agent reports
	// its own labels when it registers).
	Labels map[string]string `json:"labels,omitempty"`
	// EnrolledAt is when the current key was issued.
	EnrolledAt time.Time `json:"enrolled_at"`
}

// EnrollRequest is the body of POST /v1/agents/{id}:enroll.
type EnrollRequest struct {
	// Labels are recorded with the enrollment.
	Labels map[string]string `json:"labels,omitempty"`
	// Rotate replaces the key of an enrolled agent (its live connection is
	// closed); without it enrolling an enrolled id fails (already_exists).
	Rotate bool `json:"rotate,omitempty"`
}

// Validate checks the request; the error (a *protocol.FieldError) names
// the field.
func (r EnrollRequest) Validate() error {
	return protocol.ValidateLabels("labels", r.Labels)
}

// Enrollment is the answer of POST /v1/agents/{id}:enroll: the agent and
// its secret seed, shown once.
type Enrollment struct {
	EnrolledAgent
	// Seed is the agent's NKey user seed ("SU…"), secret.
	Seed string `json:"seed"`
}

// String hides the seed so that an Enrollment never reaches a log.
func (e Enrollment) String() string {
	return fmt.Sprintf("{%s %s seed:*****}", e.ID, e.PublicKey)
}
