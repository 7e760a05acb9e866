package controller

import (
	"crypto/tls"
	"crypto/x509"
	"os"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// TLSConfig is nats.tls: TLS of the embedded server, or of the
// controller's connection to an external server (nats.url).
type TLSConfig struct {
	// CertFile and KeyFile are a PEM certificate and its key: the embedded
	// server's certificate, or the client certificate presented to an
	// external server (optional there).
	CertFile string
	KeyFile  string
	// CAFile is a PEM bundle: the CA that signs client certificates
	// (embedded server, with VerifyClients), or the CA that signs an
	// external server's certificate (empty: the system roots).
	CAFile string
	// VerifyClients makes the embedded server require a client certificate
	// signed by CAFile from every network client.
	VerifyClients bool
}

// Enabled reports whether any nats.tls key is set.
func (t TLSConfig) Enabled() bool {
	return t.CertFile != "" || t.KeyFile != "" || t.CAFile != "" || t.VerifyClients
}

// validate checks the nats.tls keys; embedded says which side they configure.
func (t TLSConfig) validate(embedded bool) error {
	if !t.Enabled() {
		return nil
	}
	if embedded {
		if t.CertFile == "" {
			return configErr("nats.tls.cert_file", "is required when nats.tls is set (the embedded server's certificate)")
		}
		if t.KeyFile == "" {
			return configErr("nats.tls.key_file", "is required when nats.tls is set (the key of nats.tls.cert_file)")
		}
		if t.VerifyClients && t.CAFile == "" {
			return configErr("nats.tls.ca_file", "is required with nats.tls.verify_clients (the CA of the client certificates)")
		}
		return nil
	}
	if t.VerifyClients {
		return configErr("nats.tls.verify_clients", "applies to the embedded server; an external server verifies clients in its own configuration")
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return configErr("nats.tls.cert_file", "nats.tls.cert_file and nats.tls.key_file go together (client certificate)")
	}
	return nil
}

// serverTLS builds the embedded server's tls.Config (TLS 1.2 or later; with
// VerifyClients, client certificates signed by CAFile are required).
func (t TLSConfig) serverTLS() (*tls.Config, error) {
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{
		CertFile: t.CertFile,
		KeyFile:  t.KeyFile,
		CaFile:   t.CAFile,
		Verify:   t.VerifyClients,
	})
	if err != nil {
		return nil, configErr("nats.tls", "%v", err)
	}
	return tc, nil
}

// clientOptions are the nats.go options of a TLS connection to an external
// server: its CA (RootCAs; none: the system roots) and the client
// certificate, when configured. The files are checked here, so that an
// error names its key; nats.go reads them again at every (re)connect, so
// renewed files are used without a restart.
func (t TLSConfig) clientOptions() ([]nats.Option, error) {
	if !t.Enabled() {
		return nil, nil
	}
	opts := []nats.Option{nats.Secure(&tls.Config{MinVersion: tls.VersionTLS12})}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, configErr("nats.tls.ca_file", "%v", err)
		}
		if !x509.NewCertPool().AppendCertsFromPEM(pem) {
			return nil, configErr("nats.tls.ca_file", "%s holds no PEM certificate", t.CAFile)
		}
		opts = append(opts, nats.RootCAs(t.CAFile))
	}
	if t.CertFile != "" {
		if _, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile); err != nil {
			return nil, configErr("nats.tls.cert_file", "%s with key %s: %v", t.CertFile, t.KeyFile, err)
		}
		opts = append(opts, nats.ClientCert(t.CertFile, t.KeyFile))
	}
	return opts, nil
}
