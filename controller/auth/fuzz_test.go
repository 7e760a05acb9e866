package auth_test

import (
	"errors"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/axsched/ax/controller/auth"
)

// FuzzDecodeRegistry: any file content is either a valid registry (every
// entry valid, ids unique, each rendering an account nats-server accepts)
// or an ErrRegistry error — never a panic.
func FuzzDecodeRegistry(f *testing.F) {
	f.Add([]byte(`{"version":1,"agents":[]}`))
	f.Add([]byte(`{"version":2,"agents":[]}`))
	f.Add([]byte(`{"version":1,"agents":[{"id":"edge-a","public_key":"UCZG3ZKTRKWKTCS7UYQQSZH6T6H2BMEKBHLCGRMVXC5KD744DETIWXRS","labels":{"site":"lab"},"enrolled_at":"2026-11-30T00:00:00Z"}]}`))
	f.Add([]byte(`{"version":1,"agents":[{"id":"a","public_key":"SU123"}]}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, data []byte) {
		agents, err := auth.DecodeRegistry(data)
		if err != nil {
			if !errors.Is(err, auth.ErrRegistry) {
				t.Fatalf("error %v does not wrap ErrRegistry", err)
			}
			return
		}
		seen := map[string]bool{}
		for _, a := range agents {
			if seen[a.ID] {
				t.Fatalf("duplicate id %q accepted", a.ID)
			}
			seen[a.ID] = true
			var o server.Options
			if err := auth.Configure(&o, "UDKTFINKZW2G6NF6UHLPMAQCUZP6GOI6ZQU7TF6QM64V25D5KNBPCRKV", []auth.Agent{a}); err != nil || len(o.Nkeys) != 2 {
				t.Fatalf("entry %+v does not render a valid account: %v", a, err)
			}
		}
	})
}
