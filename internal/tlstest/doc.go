// Package tlstest makes throw-away certificate authorities and
// certificates for tests (crypto/x509, ECDSA P-256, written as PEM files
// into t.TempDir(): no key is ever committed). The end-to-end TLS tests
// that use it are in e2e/tlsnet.
package tlstest
