package agent

import (
	"crypto/tls"
	"crypto/x509"
	"os"

	"github.com/nats-io/nats.go"
)

// tlsOptions are the nats.go options of nats.tls: TLS 1.2 or later, the
// server's CA (RootCAs) and the client certificate (ClientCert). The files
// are checked here so that an error names its key; nats.go reads them again
// at every (re)connect, so renewed files are used without a restart.
// Nothing is returned when no nats.tls key is set.
func tlsOptions(t TLSConfig) ([]nats.Option, error) {
	if t.CAFile == "" && t.CertFile == "" && t.KeyFile == "" {
		return nil, nil
	}
	opts := []nats.Option{nats.Secure(&tls.Config{MinVersion: tls.VersionTLS12})}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, cfgErr("nats.tls.ca_file", "%v", err)
		}
		if !x509.NewCertPool().AppendCertsFromPEM(pem) {
			return nil, cfgErr("nats.tls.ca_file", "%s holds no PEM certificate", t.CAFile)
		}
		opts = append(opts, nats.RootCAs(t.CAFile))
	}
	if t.CertFile != "" {
		if _, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile); err != nil {
			return nil, cfgErr("nats.tls.cert_file", "%s with key %s: %v", t.CertFile, t.KeyFile, err)
		}
		opts = append(opts, nats.ClientCert(t.CertFile, t.KeyFile))
	}
	return opts, nil
}
