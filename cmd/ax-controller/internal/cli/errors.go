package cli

import (
	"errors"
	"fmt"
)

// ErrConfig marks a bad configuration value; the message names the key.
var ErrConfig = errors.New("invalid config")

// ErrUsage marks a bad command line (unknown flag, wrong argument count).
var ErrUsage = errors.New("usage")

func configErr(key, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrConfig, key, fmt.Sprintf(format, args...))
}
