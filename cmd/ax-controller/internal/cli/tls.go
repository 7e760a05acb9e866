package cli

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"strings"

	"github.com/nats-io/nats.go"
)

// useCAFile makes hc trust only the CA certificates in the PEM file
// caFile (--ca-file / AX_API_CA_FILE) for the https API at apiURL. An empty
// caFile keeps the system roots. A CA file with an http:// URL is refused:
// it would protect nothing.
func useCAFile(hc *http.Client, apiURL, caFile string) error {
	caFile = strings.TrimSpace(caFile)
	if caFile == "" {
		return nil
	}
	if !strings.HasPrefix(strings.ToLower(strings.TrimSpace(apiURL)), "https://") {
		return configErr("--ca-file", "(AX_API_CA_FILE) is only used with an https:// --api URL, got %q", apiURL)
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return configErr("--ca-file", "%v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return configErr("--ca-file", "%s holds no PEM certificate", caFile)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	hc.Transport = tr
	return nil
}

// natsTLSFiles are the nats.tls files of a NATS client connection (exec
// watch): the CA of the server's certificate and an optional client
// certificate with its key.
type natsTLSFiles struct {
	CAFile   string
	CertFile string
	KeyFile  string
}

// enabled reports whether any file is set.
func (f natsTLSFiles) enabled() bool {
	return f.CAFile != "" || f.CertFile != "" || f.KeyFile != ""
}

// natsTLSOptions are the nats.go options of a client connection to url:
// TLS (1.2 or later) when url is tls:// or any file is set, trusting
// CAFile (none: the system roots) and presenting CertFile/KeyFile when set.
// The files are checked here so that an error names its key and flag;
// nats.go reads them again at every (re)connect.
func natsTLSOptions(url string, f natsTLSFiles) ([]nats.Option, error) {
	f = natsTLSFiles{CAFile: strings.TrimSpace(f.CAFile), CertFile: strings.TrimSpace(f.CertFile), KeyFile: strings.TrimSpace(f.KeyFile)}
	if !f.enabled() && !strings.HasPrefix(strings.ToLower(strings.TrimSpace(url)), "tls://") {
		return nil, nil
	}
	opts := []nats.Option{nats.Secure(&tls.Config{MinVersion: tls.VersionTLS12})}
	if f.CAFile != "" {
		pem, err := os.ReadFile(f.CAFile)
		if err != nil {
			return nil, configErr("nats.tls.ca_file (--nats-ca-file)", "%v", err)
		}
		if !x509.NewCertPool().AppendCertsFromPEM(pem) {
			return nil, configErr("nats.tls.ca_file (--nats-ca-file)", "%s holds no PEM certificate", f.CAFile)
		}
		opts = append(opts, nats.RootCAs(f.CAFile))
	}
	switch {
	case f.CertFile != "" && f.KeyFile == "":
		return nil, configErr("nats.tls.key_file (--nats-key)", "is required with nats.tls.cert_file (the key of the client certificate)")
	case f.CertFile == "" && f.KeyFile != "":
		return nil, configErr("nats.tls.cert_file (--nats-cert)", "is required with nats.tls.key_file (the client certificate)")
	case f.CertFile != "":
		if _, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile); err != nil {
			return nil, configErr("nats.tls.cert_file (--nats-cert)", "%s with key %s: %v", f.CertFile, f.KeyFile, err)
		}
		opts = append(opts, nats.ClientCert(f.CertFile, f.KeyFile))
	}
	return opts, nil
}
