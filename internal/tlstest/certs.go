package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority made for one test.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	dir  string
	// File is the PEM file of the CA certificate (a ca_file).
	File string
}

// NewCA makes a CA named name, valid for a day, and writes its certificate
// to File in a new temp directory of tb.
func NewCA(tb testing.TB, name string) *CA {
	tb.Helper()
	key := newKey(tb)
	tmpl := template(tb, name)
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage |= x509.KeyUsageCertSign
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatalf("create CA %s: %v", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	ca := &CA{cert: cert, key: key, dir: tb.TempDir()}
	ca.File = filepath.Join(ca.dir, name+"-ca.crt")
	writePEM(tb, ca.File, "CERTIFICATE", der, 0o644)
	return ca
}

// Server issues a server certificate for 127.0.0.1, ::1 and localhost
// (ExtKeyUsage serverAuth) and returns its certificate and key files.
func (ca *CA) Server(tb testing.TB, name string) (certFile, keyFile string) {
	tb.Helper()
	return ca.issue(tb, name, x509.ExtKeyUsageServerAuth)
}

// Client issues a client certificate with common name name (ExtKeyUsage
// clientAuth) and returns its certificate and key files.
func (ca *CA) Client(tb testing.TB, name string) (certFile, keyFile string) {
	tb.Helper()
	return ca.issue(tb, name, x509.ExtKeyUsageClientAuth)
}

func (ca *CA) issue(tb testing.TB, name string, usage x509.ExtKeyUsage) (string, string) {
	tb.Helper()
	key := newKey(tb)
	tmpl := template(tb, name)
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{usage}
	if usage == x509.ExtKeyUsageServerAuth {
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		tmpl.DNSNames = []string{"localhost"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		tb.Fatalf("issue %s: %v", name, err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	certFile := filepath.Join(ca.dir, name+".crt")
	keyFile := filepath.Join(ca.dir, name+".key")
	writePEM(tb, certFile, "CERTIFICATE", der, 0o644)
	writePEM(tb, keyFile, "EC PRIVATE KEY", kder, 0o600)
	return certFile, keyFile
}

// template is a certificate for common name name with a random serial,
// valid from an hour ago for a day, for digital signatures.
func template(tb testing.TB, name string) *x509.Certificate {
	tb.Helper()
	return &x509.Certificate{
		SerialNumber: serial(tb),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
}

func newKey(tb testing.TB) *ecdsa.PrivateKey {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return key
}

func serial(tb testing.TB) *big.Int {
	tb.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

func writePEM(tb testing.TB, path, typ string, der []byte, mode os.FileMode) {
	tb.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode); err != nil {
		tb.Fatal(err)
	}
}
