package auth

import "fmt"

// Modes of nats.auth.
const (
	// ModeNone runs the embedded server without authentication (loopback only).
	ModeNone = "none"
	// ModeNKeys gives the controller and every enrolled agent its own NKey
	// user, each agent in an account of its own (accounts.go).
	ModeNKeys = "nkeys"
)

// ValidateMode checks a nats.auth value ("" means ModeNone).
func ValidateMode(mode string) error {
	switch mode {
	case "", ModeNone, ModeNKeys:
		return nil
	}
	return fmt.Errorf("%w: nats.auth: must be %q or %q, got %q", ErrInvalid, ModeNone, ModeNKeys, mode)
}
