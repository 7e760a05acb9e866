package handler

import (
	"fmt"
	"slices"
)

// Registry maps handler names to the functions that run them: exec and
// http (built in, registered by the agent from its config) and the Go
// handlers of an embedding program, all alike. Register before the agent
// runs; Lookup is then safe from any goroutine (the map is not changed).
type Registry struct {
	fns map[string]Func
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{fns: map[string]Func{}} }

// Register adds fn under name; a name registered already is refused
// (ErrDuplicate), so a program cannot replace exec or http.
func (r *Registry) Register(name string, fn Func) error {
	if _, ok := r.fns[name]; ok {
		return fmt.Errorf("%w: %q", ErrDuplicate, name)
	}
	r.fns[name] = fn
	return nil
}

// Lookup returns the handler registered under name.
func (r *Registry) Lookup(name string) (Func, bool) {
	fn, ok := r.fns[name]
	return fn, ok
}

// Names lists the registered names, sorted.
func (r *Registry) Names() []string {
	out := make([]string, 0, len(r.fns))
	for n := range r.fns {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
