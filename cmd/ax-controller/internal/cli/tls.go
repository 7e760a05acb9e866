package cli

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"strings"
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
