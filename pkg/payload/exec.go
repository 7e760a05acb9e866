package payload

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
)

// Exec is the payload of an exec job.
type Exec struct {
	// Command is the absolute, clean path of the program to run.
	Command string `json:"command"`
	// Args are its arguments (no NUL).
	Args []string `json:"args,omitempty"`
	// Stdin is written to its standard input.
	Stdin string `json:"stdin,omitempty"`
	// Env are variables added to its environment; names without '=' or
	// NUL and not starting with AX_ (the agent sets those).
	Env map[string]string `json:"env,omitempty"`
	// Dir is its working directory.
	Dir string `json:"dir,omitempty"`
}

// DecodeExec decodes and checks an exec payload: JSON without unknown
// fields, a command that is an absolute, clean path, arguments and env
// names as Exec says.
func DecodeExec(b []byte) (Exec, error) {
	var p Exec
	if err := decodeStrict(b, &p); err != nil {
		return p, err
	}
	if p.Command == "" {
		return p, invalid("payload.command", "is required")
	}
	if !filepath.IsAbs(p.Command) || filepath.Clean(p.Command) != p.Command {
		return p, invalid("payload.command", fmt.Sprintf("%q must be an absolute, clean path", p.Command))
	}
	for k := range p.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.HasPrefix(k, "AX_") {
			return p, invalid("payload.env", fmt.Sprintf("bad variable name %q (no '=', NUL or AX_ prefix)", k))
		}
	}
	for _, a := range p.Args {
		if strings.IndexByte(a, 0) >= 0 {
			return p, invalid("payload.args", "must not contain NUL")
		}
	}
	return p, nil
}

// decodeStrict decodes one JSON value into v, refusing unknown fields and
// data after it.
func decodeStrict(b []byte, v any) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return invalid("payload", "is required")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return invalid("payload", err.Error())
	}
	if rest := bytes.TrimSpace(b[dec.InputOffset():]); len(rest) > 0 {
		return invalid("payload", "has data after its JSON value")
	}
	return nil
}
