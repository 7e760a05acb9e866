package agent

import (
	"bytes"
	"fmt"
	"os"

	"github.com/nats-io/nats.go"
)

// credsOption reads nats.creds: a NATS credentials file (user JWT and
// seed, for an external server in operator mode) or an NKey seed file (as
// written by `ax-controller agent enroll`, for the embedded server).
func credsOption(path string) (nats.Option, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("nats.creds: %w", err)
	}
	hasJWT := bytes.Contains(data, []byte("BEGIN NATS USER JWT"))
	for i := range data {
		data[i] = 'x'
	}
	if hasJWT {
		return nats.UserCredentials(path), nil
	}
	opt, err := nats.NkeyOptionFromSeed(path)
	if err != nil {
		return nil, fmt.Errorf("nats.creds: %s is neither a creds file nor an nkey seed file: %w", path, err)
	}
	return opt, nil
}
