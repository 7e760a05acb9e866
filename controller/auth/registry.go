package auth

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/axsched/ax/pkg/apiv1"
	"github.com/axsched/ax/pkg/protocol"
)

// RegistryFile is the enrolled-agent registry under the auth directory.
const RegistryFile = "agents.json"

// Agent is an enrolled agent (apiv1.EnrolledAgent: the API's type).
type Agent = apiv1.EnrolledAgent

// EnrollRequest is the body of POST /v1/agents/{id}:enroll.
type EnrollRequest = apiv1.EnrollRequest

// Enrollment is an enrolled agent with its seed, shown once.
type Enrollment = apiv1.Enrollment

// registryDoc is the file format of the registry.
type registryDoc struct {
	Version int     `json:"version"`
	Agents  []Agent `json:"agents"`
}

// Registry is the persistent set of enrolled agents: a JSON file (mode
// 0600) in a directory (mode 0700). Every change is written before it
// returns. It is safe for concurrent use.
type Registry struct {
	path string

	mu     sync.Mutex
	agents map[string]Agent
}

// OpenRegistry loads (or starts) the registry in dir, creating dir with mode 0700.
func OpenRegistry(dir string) (*Registry, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRegistry, err)
	}
	r := &Registry{path: filepath.Join(dir, RegistryFile), agents: map[string]Agent{}}
	data, err := os.ReadFile(r.path)
	if errors.Is(err, fs.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRegistry, err)
	}
	if err := checkPrivate(r.path); err != nil {
		return nil, err
	}
	agents, err := DecodeRegistry(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.path, err)
	}
	for _, a := range agents {
		r.agents[a.ID] = a
	}
	return r, nil
}

// Open opens the controller's NATS identity and the registry of enrolled
// agents in dir (the controller's auth directory). At first use it writes
// an empty registry and then makes the controller's key. When the key
// exists but the registry file does not, it fails with ErrRegistryMissing
// naming the file: a controller started without it would refuse every
// enrolled agent.
func Open(dir string) (controllerKey, seedPath string, reg *Registry, err error) {
	regPath := filepath.Join(dir, RegistryFile)
	_, keyErr := os.Stat(filepath.Join(dir, ControllerSeedFile))
	_, regErr := os.Stat(regPath)
	switch {
	case keyErr == nil && errors.Is(regErr, fs.ErrNotExist):
		return "", "", nil, fmt.Errorf("%w: %s does not exist, but the controller's key %s does: "+
			"started without it, the controller would refuse every enrolled agent. Restore it from a backup, "+
			"or, to start with no enrolled agents, create it with the content {\"version\":1,\"agents\":[]} (mode 0600)",
			ErrRegistryMissing, regPath, filepath.Join(dir, ControllerSeedFile))
	case errors.Is(keyErr, fs.ErrNotExist) && errors.Is(regErr, fs.ErrNotExist):
		r, err := OpenRegistry(dir)
		if err != nil {
			return "", "", nil, err
		}
		r.mu.Lock()
		err = r.saveLocked()
		r.mu.Unlock()
		if err != nil {
			return "", "", nil, err
		}
	}
	controllerKey, seedPath, err = ControllerIdentity(dir)
	if err != nil {
		return "", "", nil, err
	}
	reg, err = OpenRegistry(dir)
	if err != nil {
		return "", "", nil, err
	}
	return controllerKey, seedPath, reg, nil
}

// DecodeRegistry parses and validates the contents of a registry file.
// Errors wrap ErrRegistry and name the entry.
func DecodeRegistry(data []byte) ([]Agent, error) {
	var doc registryDoc
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRegistry, err)
	}
	if doc.Version != 1 {
		return nil, fmt.Errorf("%w: version: %d is not supported (want 1)", ErrRegistry, doc.Version)
	}
	seen := make(map[string]bool, len(doc.Agents))
	for i, a := range doc.Agents {
		if err := validateAgent(a); err != nil {
			return nil, fmt.Errorf("%w: agents[%d]: %w", ErrRegistry, i, err)
		}
		if seen[a.ID] {
			return nil, fmt.Errorf("%w: agents[%d]: id %q appears twice", ErrRegistry, i, a.ID)
		}
		seen[a.ID] = true
	}
	return doc.Agents, nil
}

func validateAgent(a Agent) error {
	if err := protocol.ValidateName("id", a.ID); err != nil {
		return err
	}
	if !nkeys.IsValidPublicUserKey(a.PublicKey) {
		return fmt.Errorf("public_key: %q is not an NKey user public key", a.PublicKey)
	}
	return protocol.ValidateLabels("labels", a.Labels)
}

// Path is the registry file.
func (r *Registry) Path() string { return r.path }

// Enroll issues a new key for agent id, stores its public key and returns
// the enrollment with the seed. An enrolled id fails with
// ErrAlreadyEnrolled unless req.Rotate is set.
func (r *Registry) Enroll(id string, req EnrollRequest, now time.Time) (Enrollment, error) {
	if err := protocol.ValidateName("id", id); err != nil {
		return Enrollment{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := req.Validate(); err != nil {
		return Enrollment{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	pub, seed, err := NewUserKey()
	if err != nil {
		return Enrollment{}, err
	}
	a := Agent{ID: id, PublicKey: pub, Labels: maps.Clone(req.Labels), EnrolledAt: now.UTC().Round(0)}
	r.mu.Lock()
	defer r.mu.Unlock()
	old, exists := r.agents[id]
	if exists && !req.Rotate {
		return Enrollment{}, fmt.Errorf("%w: %s (enrolled %s; rotate to issue a new key)", ErrAlreadyEnrolled, id, old.EnrolledAt.Format(time.RFC3339))
	}
	r.agents[id] = a
	if err := r.saveLocked(); err != nil {
		if exists {
			r.agents[id] = old
		} else {
			delete(r.agents, id)
		}
		return Enrollment{}, err
	}
	return Enrollment{EnrolledAgent: a, Seed: string(seed)}, nil
}

// Revoke removes agent id and returns what it was.
func (r *Registry) Revoke(id string) (Agent, error) {
	if err := protocol.ValidateName("id", id); err != nil {
		return Agent{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok := r.agents[id]
	if !ok {
		return Agent{}, fmt.Errorf("%w: %s", ErrNotEnrolled, id)
	}
	delete(r.agents, id)
	if err := r.saveLocked(); err != nil {
		r.agents[id] = a
		return Agent{}, err
	}
	return a, nil
}

// Restore puts back an agent removed or replaced by a change that could
// not be applied (the caller's rollback).
func (r *Registry) Restore(a Agent) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.agents[a.ID] = a
	return r.saveLocked()
}

// Remove drops agent id if its key is publicKey (the rollback of an enrollment).
func (r *Registry) Remove(id, publicKey string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a, ok := r.agents[id]; ok && a.PublicKey == publicKey {
		delete(r.agents, id)
		return r.saveLocked()
	}
	return nil
}

// Get returns one enrolled agent.
func (r *Registry) Get(id string) (Agent, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok := r.agents[id]
	return a, ok
}

// List returns the enrolled agents sorted by id.
func (r *Registry) List() []Agent {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Collect(maps.Values(r.agents))
	slices.SortFunc(out, func(a, b Agent) int { return strings.Compare(a.ID, b.ID) })
	return out
}

func (r *Registry) saveLocked() error {
	doc := registryDoc{Version: 1, Agents: make([]Agent, 0, len(r.agents))}
	for _, a := range r.agents {
		doc.Agents = append(doc.Agents, a)
	}
	slices.SortFunc(doc.Agents, func(a, b Agent) int { return strings.Compare(a.ID, b.ID) })
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("%w: %w", ErrRegistry, err)
	}
	if err := WriteSecretFile(r.path, append(data, '\n')); err != nil {
		return fmt.Errorf("%w: %w", ErrRegistry, err)
	}
	return nil
}
