package api

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Reasons of ax_api_rejected_total.
const (
	// RejectTooLarge counts request bodies over the size limit (413).
	RejectTooLarge = "too_large"
)

// newRejected registers ax_api_rejected_total{reason} on reg (nil: a
// counter that is not exported). A handler made again on the same registry
// shares the counter already registered there.
func newRejected(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ax_api_rejected_total",
		Help: "API requests refused for their input before reaching the controller, by reason (too_large: body over the limit, HTTP 413).",
	}, []string{"reason"})
	if reg == nil {
		return c, nil
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if ex, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
				return ex, nil
			}
		}
		return nil, fmt.Errorf("%w: register ax_api_rejected_total: %v", ErrConfig, err)
	}
	return c, nil
}
