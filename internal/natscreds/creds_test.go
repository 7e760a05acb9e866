package natscreds

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/nkeys"
)

// TestOption: Option takes an nkey seed file (agent enroll) or a
// creds file with a user JWT; anything else is a clear error.
func TestOption(t *testing.T) {
	dir := t.TempDir()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, err := kp.Seed()
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	seedFile := write("seed.nk", "# comment\n-----BEGIN USER NKEY SEED-----\n"+string(seed)+"\n------END USER NKEY SEED------\n")
	credsFile := write("user.creds", "-----BEGIN NATS USER JWT-----\neyJ0eXAi.x.y\n------END NATS USER JWT------\n\n-----BEGIN USER NKEY SEED-----\n"+string(seed)+"\n------END USER NKEY SEED------\n")
	for _, tc := range []struct {
		name, path string
		ok         bool
	}{
		{"seed file", seedFile, true},
		{"creds file", credsFile, true},
		{"missing", filepath.Join(dir, "nope"), false},
		{"garbage", write("junk", "hello\n"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opt, err := Option(tc.path)
			if (err == nil) != tc.ok || (tc.ok && opt == nil) {
				t.Fatalf("Option(%s): %v", tc.name, err)
			}
		})
	}
}
