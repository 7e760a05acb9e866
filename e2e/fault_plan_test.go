package e2e

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"syscall"
	"time"
)

// The fault plan of TestFaultInjection, drawn from the seed before the
// run: what happens to which process when. The times are offsets from the
// start of the fault phase; the loop that applies them is late by however
// long a restart takes, so a seed reproduces the plan, not the exact
// interleaving.

// faultKind is one kind of fault.
type faultKind int

const (
	faultAgentKill faultKind = iota // SIGKILL an agent, restart it (same store) after length
	faultAgentCut                   // cut an agent's link for length
	faultAgentStop                  // SIGSTOP an agent, SIGCONT after length
	faultCtlKill                    // SIGKILL the controller, restart it after length
	faultCtlStop                    // SIGSTOP the controller, SIGCONT after length
	faultCtlCut                     // cut a replica's link to NATS for length (replicas only)
	faultCtlFreeze                  // freeze a replica's link to NATS (no reset: bytes wait) for length (replicas only)
)

func (k faultKind) String() string {
	return [...]string{"agent-kill", "agent-cut", "agent-stop", "ctl-kill", "ctl-stop", "ctl-cut", "ctl-freeze"}[k]
}

// fault is one fault of the plan.
type fault struct {
	at     time.Duration
	kind   faultKind
	agent  int // index of the agent; -1 for a controller
	ctl    int // index of the controller (replica) when agent is -1
	length time.Duration
	who    string // "a1", "controller", "fault-2"
}

func (f fault) String() string {
	return fmt.Sprintf("%s %s for %s", f.kind, f.who, f.length.Round(10*time.Millisecond))
}

// planFaults draws the faults of a fault phase of span for agents agents
// and replicas controllers: one every 1-3.5s, each kind with its weight
// and length range (scaled down from the 5-20s of the black-box run to the
// 2s lease TTL: below and above it), at most one fault at a time per
// process, all over by span. With one controller the draws are those of
// the plans before replicas, so a seed gives the plan it gave then.
func planFaults(rng *rand.Rand, span time.Duration, agents, replicas int) []fault {
	type kindSpec struct {
		kind     faultKind
		weight   int
		min, max time.Duration
	}
	kinds := []kindSpec{
		{faultAgentKill, 25, 300 * time.Millisecond, 4 * time.Second},
		{faultAgentCut, 25, time.Second, 6 * time.Second},
		{faultAgentStop, 20, 500 * time.Millisecond, 4 * time.Second},
		{faultCtlKill, 15, 300 * time.Millisecond, 5 * time.Second},
		{faultCtlStop, 15, 500 * time.Millisecond, 3 * time.Second},
	}
	if replicas > 1 {
		kinds = append(kinds, kindSpec{faultCtlCut, 15, time.Second, 6 * time.Second},
			kindSpec{faultCtlFreeze, 10, time.Second, 8 * time.Second})
	}
	total := 0
	for _, k := range kinds {
		total += k.weight
	}
	busy := make([]time.Duration, agents+max(replicas, 1)) // per agent, then per controller: busy until
	var out []fault
	for at := 3 * time.Second; ; at += time.Second + time.Duration(rng.Int64N(int64(2500*time.Millisecond))) {
		w := rng.IntN(total)
		var k kindSpec
		for _, k = range kinds {
			if w < k.weight {
				break
			}
			w -= k.weight
		}
		length := k.min + time.Duration(rng.Int64N(int64(k.max-k.min)))
		f := fault{at: at, kind: k.kind, agent: -1, length: length, who: "controller"}
		slot := agents
		if k.kind <= faultAgentStop {
			f.agent = rng.IntN(agents)
			slot, f.who = f.agent, fmt.Sprintf("a%d", f.agent+1)
		} else if replicas > 1 {
			f.ctl = rng.IntN(replicas)
			slot, f.who = agents+f.ctl, fmt.Sprintf("fault-%d", f.ctl+1)
		}
		if at+length > span-2*time.Second {
			return out
		}
		if busy[slot] > at {
			continue
		}
		busy[slot] = at + length + 500*time.Millisecond
		out = append(out, f)
	}
}

// faultStep is the start or the end of a fault.
type faultStep struct {
	at  time.Duration
	f   fault
	end bool
}

// faultSteps is the plan as starts and ends in time order.
func faultSteps(plan []fault) []faultStep {
	var out []faultStep
	for _, f := range plan {
		out = append(out, faultStep{at: f.at, f: f}, faultStep{at: f.at + f.length, f: f, end: true})
	}
	slices.SortStableFunc(out, func(a, b faultStep) int { return int(a.at - b.at) })
	return out
}

// apply starts or ends one fault.
func (c *faultCluster) apply(s faultStep) {
	c.t.Helper()
	var a *faultAgent
	if s.f.agent >= 0 {
		a = c.agents[s.f.agent]
	}
	switch {
	case s.f.kind == faultAgentKill && !s.end:
		c.killAgent(a)
	case s.f.kind == faultAgentKill:
		c.startAgent(a)
	case s.f.kind == faultAgentCut && !s.end:
		a.proxy.Cut()
	case s.f.kind == faultAgentCut:
		a.proxy.Heal()
	case s.f.kind == faultAgentStop && !s.end:
		c.signalAgent(a, syscall.SIGSTOP)
	case s.f.kind == faultAgentStop:
		c.signalAgent(a, syscall.SIGCONT)
	case s.f.kind == faultCtlKill && !s.end:
		c.killController(s.f.ctl)
	case s.f.kind == faultCtlKill:
		c.startController(s.f.ctl)
	case s.f.kind == faultCtlStop && !s.end:
		c.signalController(s.f.ctl, syscall.SIGSTOP)
	case s.f.kind == faultCtlStop:
		c.signalController(s.f.ctl, syscall.SIGCONT)
	case s.f.kind == faultCtlCut, s.f.kind == faultCtlFreeze:
		c.linkFault(s.f.ctl, s.f.kind == faultCtlFreeze, !s.end)
	}
	if s.end {
		c.note("end   %s", s.f)
	} else {
		c.note("start %s", s.f)
		if s.f.agent < 0 {
			c.ctls[s.f.ctl].stalls = append(c.ctls[s.f.ctl].stalls, time.Now())
		}
	}
}

// runFaults applies the plan from c.t0 on, each step at its time or as
// soon as the one before it is done; it returns when the plan is over.
func (c *faultCluster) runFaults(plan []fault) {
	c.t.Helper()
	for _, s := range faultSteps(plan) {
		if d := time.Until(c.t0.Add(s.at)); d > 0 {
			<-time.After(d) // the plan's own clock, not a wait for a condition
		}
		c.apply(s)
	}
}
