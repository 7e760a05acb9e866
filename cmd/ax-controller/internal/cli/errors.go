package cli

import (
	"errors"
	"fmt"
)

// ErrConfig marks a bad configuration value; the message names the key.
var ErrConfig = errors.New("invalid config")

// ErrUsage marks a bad command line (unknown flag, wrong argument count).
var ErrUsage = errors.New("usage")

// ConfigError is a bad configuration value of a key this package owns.
// errors.Is(err, ErrConfig) is true; Key names it as in the YAML file.
// (Keys checked by the controller fail with *controller.ConfigError.)
type ConfigError struct {
	// Key is the configuration key, dotted ("api.tokens[0].role").
	Key string
	// Reason says what is wrong, with the value given.
	Reason string
}

// Error returns "invalid config: key: reason".
func (e *ConfigError) Error() string { return ErrConfig.Error() + ": " + e.Key + ": " + e.Reason }

// Unwrap returns ErrConfig.
func (e *ConfigError) Unwrap() error { return ErrConfig }

func configErr(key, format string, args ...any) error {
	return &ConfigError{Key: key, Reason: fmt.Sprintf(format, args...)}
}
