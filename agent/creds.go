package agent

import (
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/axsched/ax/internal/natscreds"
)

// credsOption reads nats.creds: a NATS credentials file (user JWT and
// seed, for an external server in operator mode) or an NKey seed file (as
// written by `ax-controller agent enroll`, for the embedded server).
func credsOption(path string) (nats.Option, error) {
	opt, err := natscreds.Option(path)
	if err != nil {
		return nil, fmt.Errorf("nats.creds: %w", err)
	}
	return opt, nil
}
