package auth_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/controller/auth"
	"github.com/axsched/ax/pkg/protocol"
)

var t0 = time.Date(2026, 11, 30, 1, 2, 3, 0, time.UTC)

// TestRegistryPersists: enrollments and revocations survive a reopen; the
// file is 0600 in a 0700 directory and holds no seed.
func TestRegistryPersists(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "auth")
	r, err := auth.OpenRegistry(dir)
	if err != nil {
		t.Fatal(err)
	}
	a, err := r.Enroll("edge-a", auth.EnrollRequest{Labels: map[string]string{"site": "lab"}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.Enroll("edge-b", auth.EnrollRequest{}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Revoke("edge-b"); err != nil {
		t.Fatal(err)
	}
	if m := mode(t, dir); m != 0o700 {
		t.Errorf("dir mode %04o, want 0700", m)
	}
	if m := mode(t, r.Path()); m != 0o600 {
		t.Errorf("file mode %04o, want 0600", m)
	}
	data, err := os.ReadFile(r.Path())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), a.Seed) || strings.Contains(string(data), b.Seed) {
		t.Fatal("the registry file holds a seed")
	}
	r2, err := auth.OpenRegistry(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := r2.List()
	if len(got) != 1 || got[0].ID != "edge-a" || got[0].PublicKey != a.PublicKey || got[0].Labels["site"] != "lab" || !got[0].EnrolledAt.Equal(t0) {
		t.Fatalf("reopened registry: %+v", got)
	}
}

// TestRegistryErrors: each refusal has its sentinel and changes nothing.
func TestRegistryErrors(t *testing.T) {
	r, err := auth.OpenRegistry(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	first, err := r.Enroll("edge-a", auth.EnrollRequest{}, t0)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		do   func() error
		want error
	}{
		{"enroll twice", func() error { _, err := r.Enroll("edge-a", auth.EnrollRequest{}, t0); return err }, auth.ErrAlreadyEnrolled},
		{"revoke unknown", func() error { _, err := r.Revoke("edge-z"); return err }, auth.ErrNotEnrolled},
		{"bad id", func() error { _, err := r.Enroll("a.b", auth.EnrollRequest{}, t0); return err }, protocol.ErrInvalid},
		{"empty id", func() error { _, err := r.Enroll("", auth.EnrollRequest{}, t0); return err }, auth.ErrInvalid},
		{"wildcard id", func() error { _, err := r.Enroll("*", auth.EnrollRequest{}, t0); return err }, auth.ErrInvalid},
		{"bad label", func() error {
			_, err := r.Enroll("edge-b", auth.EnrollRequest{Labels: map[string]string{"bad key": "x"}}, t0)
			return err
		}, auth.ErrInvalid},
		{"revoke bad id", func() error { _, err := r.Revoke(">"); return err }, auth.ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.do(); !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if l := r.List(); len(l) != 1 || l[0].PublicKey != first.PublicKey {
				t.Fatalf("registry changed: %+v", l)
			}
		})
	}
	// Rotation replaces the key.
	rot, err := r.Enroll("edge-a", auth.EnrollRequest{Rotate: true}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if rot.PublicKey == first.PublicKey {
		t.Fatal("rotation kept the key")
	}
	if got, _ := r.Get("edge-a"); got.PublicKey != rot.PublicKey {
		t.Fatalf("registry has %s after rotation", got.PublicKey)
	}
	if s := rot.String(); strings.Contains(s, rot.Seed) {
		t.Fatalf("Enrollment.String shows the seed: %s", s)
	}
}

// TestRegistryBadFile: an unreadable, corrupt or world-readable file is refused.
func TestRegistryBadFile(t *testing.T) {
	for _, tc := range []struct {
		name    string
		content string
		mode    os.FileMode
	}{
		{"not json", "{", 0o600},
		{"bad id", `{"version":1,"agents":[{"id":"a b","public_key":"UAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}]}`, 0o600},
		{"bad key", `{"version":1,"agents":[{"id":"a","public_key":"SU123"}]}`, 0o600},
		{"readable by others", `{"version":1,"agents":[]}`, 0o644},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, auth.RegistryFile), []byte(tc.content), tc.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(filepath.Join(dir, auth.RegistryFile), tc.mode); err != nil {
				t.Fatal(err)
			}
			if _, err := auth.OpenRegistry(dir); !errors.Is(err, auth.ErrRegistry) {
				t.Fatalf("err %v, want ErrRegistry", err)
			}
		})
	}
}

// TestControllerIdentity: made once, 0600, the same key afterwards; a
// world-readable seed is refused.
func TestControllerIdentity(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "auth")
	pub, path, err := auth.ControllerIdentity(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m := mode(t, path); m != 0o600 {
		t.Fatalf("seed mode %04o", m)
	}
	pub2, _, err := auth.ControllerIdentity(dir)
	if err != nil || pub2 != pub {
		t.Fatalf("second call: %s %v, want %s", pub2, err, pub)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := auth.ControllerIdentity(dir); !errors.Is(err, auth.ErrRegistry) {
		t.Fatalf("world-readable seed: %v, want ErrRegistry", err)
	}
}

// TestOpen: the first Open writes an empty registry and the controller's
// key; an Open that finds the key without the registry fails naming it.
func TestOpen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "auth")
	pub, _, reg, err := auth.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(reg.List()) != 0 || mode(t, reg.Path()) != 0o600 {
		t.Fatalf("first open: %d agents, registry mode %04o", len(reg.List()), mode(t, reg.Path()))
	}
	if pub2, _, _, err := auth.Open(dir); err != nil || pub2 != pub {
		t.Fatalf("second open: %s %v, want %s", pub2, err, pub)
	}
	if err := os.Remove(reg.Path()); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := auth.Open(dir); !errors.Is(err, auth.ErrRegistryMissing) || !strings.Contains(err.Error(), reg.Path()) {
		t.Fatalf("open without the registry: %v, want ErrRegistryMissing naming %s", err, reg.Path())
	}
	if err := auth.ValidateMode("jwt"); !errors.Is(err, auth.ErrInvalid) {
		t.Errorf("ValidateMode(jwt): %v", err)
	}
}
