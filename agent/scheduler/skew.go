package scheduler

import "time"

// overMaxSkew reports whether clock offset off is over clock.max_skew.
func (t *trigger) overMaxSkew(off time.Duration) bool {
	return off > t.env.cfg.MaxSkew || -off > t.env.cfg.MaxSkew
}

// checkSkew applies clock.max_skew to the current offset estimate.
func (t *trigger) checkSkew() {
	off := t.env.host.ClockOffset()
	over := t.overMaxSkew(off)
	wasRefusing, wasAdopt := t.skewRefusing, t.adopt
	if t.env.cfg.AdoptSkew {
		t.skewRefusing, t.adopt = false, over
	} else {
		t.skewRefusing, t.adopt = over, false
	}
	t.refusing.Store(t.skewRefusing)
	if t.skewRefusing && !wasRefusing {
		t.env.cfg.Log.Error("clock skew to the controller is over clock.max_skew: refusing to fire", "offset", off,
			"max_skew", t.env.cfg.MaxSkew)
	}
	if !t.skewRefusing && wasRefusing {
		t.env.cfg.Log.Info("clock skew back within clock.max_skew: firing again", "offset", off)
		held := t.held
		t.held = nil
		for _, w := range held {
			t.pending++
			t.fire(w)
		}
		t.replanAll(true)
	}
	if t.adopt != wasAdopt {
		t.env.cfg.Log.Warn("clock skew over clock.max_skew: planning on controller time", "offset", off, "adopt", t.adopt)
		t.replanAll(false)
	}
}
