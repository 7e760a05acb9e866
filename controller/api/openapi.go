package api

import (
	_ "embed" // the OpenAPI document
	"net/http"
)

// openAPIPath is where the API serves its OpenAPI document, without a token.
const openAPIPath = "/v1/openapi.yaml"

//go:embed openapi.yaml
var openAPIDoc []byte

// OpenAPI returns the OpenAPI 3 description of the API (YAML), as served
// at GET /v1/openapi.yaml.
func OpenAPI() []byte { return append([]byte(nil), openAPIDoc...) }

func (s *server) openAPI(w http.ResponseWriter, r *http.Request) {
	if _, err := query(r); err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/yaml")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(openAPIDoc)
}
