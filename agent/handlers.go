package agent

import (
	"fmt"
	"slices"

	"github.com/axsched/ax/agent/handler"
	"github.com/axsched/ax/pkg/clock"
	"github.com/axsched/ax/pkg/payload"
	"github.com/axsched/ax/pkg/protocol"
)

// newRegistry registers the built-in handlers, exec and http, configured
// from cfg, then the program's Go handlers (WithHandler), which may not
// take a built-in name.
func newRegistry(cfg Config, clk clock.Clock, fns map[string]HandlerFunc) (*handler.Registry, error) {
	r := handler.NewRegistry()
	execH, err := handler.NewExec(handler.ExecConfig{Allow: cfg.Exec.Allow, EnvAllow: cfg.Exec.EnvAllow, PermanentExitCodes: cfg.Exec.PermanentExitCodes})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	httpH, err := handler.NewHTTP(handler.HTTPConfig{Allow: cfg.HTTP.Allow, Now: clk.Now, IdlePerHost: cfg.Workers})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	for _, b := range []struct {
		name string
		fn   handler.Func
	}{{payload.HandlerExec, execH.Run}, {payload.HandlerHTTP, httpH.Run}} {
		if err := r.Register(b.name, b.fn); err != nil {
			return nil, err
		}
	}
	names := make([]string, 0, len(fns))
	for name := range fns {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := protocol.ValidateName("handler", name); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		if err := r.Register(name, fns[name]); err != nil {
			return nil, cfgErr("handler", "%q is built in", name)
		}
	}
	return r, nil
}
