package natscreds

import (
	"bytes"
	"fmt"
	"os"

	"github.com/nats-io/nats.go"
)

// Option returns the nats.go option for the credentials file at path: a
// .creds file (it holds a user JWT) or an NKey seed file. The bytes read to
// tell them apart are overwritten before return.
func Option(path string) (nats.Option, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read credentials: %w", err)
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
		return nil, fmt.Errorf("%s is neither a creds file nor an nkey seed file: %w", path, err)
	}
	return opt, nil
}
