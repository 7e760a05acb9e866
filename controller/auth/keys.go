package auth

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/axsched/ax/internal/natscreds"
)

// ControllerSeedFile is the controller's own seed file under the auth directory.
const ControllerSeedFile = "controller.nk"

// NewUserKey makes a new NKey user key pair and returns its public key
// ("U…") and seed ("SU…"). The caller must keep the seed secret.
func NewUserKey() (public string, seed []byte, err error) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return "", nil, fmt.Errorf("create nkey user: %w", err)
	}
	defer kp.Wipe()
	public, err = kp.PublicKey()
	if err != nil {
		return "", nil, fmt.Errorf("nkey public key: %w", err)
	}
	s, err := kp.Seed()
	if err != nil {
		return "", nil, fmt.Errorf("nkey seed: %w", err)
	}
	// Wipe overwrites the key pair's own copy of the seed.
	return public, append([]byte(nil), s...), nil
}

// SeedFile returns the contents of a seed file for who: a comment and the
// decorated seed. nats.go reads it with nats.NkeyOptionFromSeed, and the
// ax agent with its nats.creds key.
func SeedFile(who string, seed []byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# ax NATS identity of %s: an NKey user seed. Keep it secret (mode 0600).\n", who)
	b.WriteString("-----BEGIN USER NKEY SEED-----\n")
	b.Write(seed)
	b.WriteString("\n------END USER NKEY SEED------\n")
	return b.Bytes()
}

// PublicKeyFromSeedFile reads a seed file and returns its user public key.
func PublicKeyFromSeedFile(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read seed file: %w", err)
	}
	defer wipe(data)
	kp, err := nkeys.ParseDecoratedUserNKey(data)
	if err != nil {
		return "", fmt.Errorf("seed file %s: %w", path, err)
	}
	defer kp.Wipe()
	return kp.PublicKey()
}

// WriteSecretFile writes data to path with mode 0600, atomically (temp file,
// fsync, rename): a reader never sees a partial file. An existing file is
// replaced.
func WriteSecretFile(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after the rename
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// CredsOption returns the nats.go option for a credentials file: a NATS
// .creds file (user JWT and seed, operator mode) or an NKey seed file (as
// written by SeedFile).
func CredsOption(path string) (nats.Option, error) { return natscreds.Option(path) }

// ControllerIdentity returns the controller's public key and seed file path
// under dir, creating the key (mode 0600) at first use.
func ControllerIdentity(dir string) (public, seedPath string, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", fmt.Errorf("%w: %w", ErrRegistry, err)
	}
	seedPath = filepath.Join(dir, ControllerSeedFile)
	public, err = PublicKeyFromSeedFile(seedPath)
	if err == nil {
		if err := checkPrivate(seedPath); err != nil {
			return "", "", err
		}
		return public, seedPath, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", "", fmt.Errorf("%w: controller identity: %w", ErrRegistry, err)
	}
	public, seed, err := NewUserKey()
	if err != nil {
		return "", "", err
	}
	defer wipe(seed)
	if err := WriteSecretFile(seedPath, SeedFile("the ax controller", seed)); err != nil {
		return "", "", fmt.Errorf("%w: controller identity: %w", ErrRegistry, err)
	}
	return public, seedPath, nil
}

// checkPrivate refuses a secret file that group or others can read.
func checkPrivate(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrRegistry, err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%w: %s has mode %04o; it holds a secret and must not be readable by group or others (chmod 600)",
			ErrRegistry, path, st.Mode().Perm())
	}
	return nil
}

func wipe(b []byte) {
	for i := range b {
		b[i] = 'x'
	}
}
