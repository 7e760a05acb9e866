package payload

import "encoding/json"

// Handler names of the built-in handlers.
const (
	// HandlerExec runs a command (Exec).
	HandlerExec = "exec"
	// HandlerHTTP calls a URL (HTTP).
	HandlerHTTP = "http"
)

// Validate checks the payload of a job for handler: DecodeExec's checks for
// exec, DecodeHTTP's for http, none for any other handler (a Go handler of
// an embedding program reads its payload its own way).
func Validate(handler string, p json.RawMessage) error {
	switch handler {
	case HandlerExec:
		_, err := DecodeExec(p)
		return err
	case HandlerHTTP:
		_, err := DecodeHTTP(p)
		return err
	}
	return nil
}
