// Package tlstest makes throw-away certificate authorities and
// certificates for tests (crypto/x509, ECDSA P-256, written as PEM files
// into t.TempDir(): no key is ever committed), and holds the end-to-end TLS
// tests of ax: a real controller whose embedded NATS server serves TLS and
// verifies client certificates, and real agents that connect to it with
// and without the right certificates.
package tlstest
