package fleet

import "time"

// Each agent's registrations and heartbeats are admitted per agent
// (internal/admission) before they take a place in a queue. A
// registration: one waiting, one a second. A heartbeat: two waiting (a
// periodic one and the last one, sent at stop, may cross), five at once,
// then five per heartbeat interval. An agent registers once per
// connection and heartbeats once per interval, each after the reply to
// the one before (or its timeout), so no bound touches it. They stop one
// device, or a stolen key, that publishes requests as fast as it can: its
// registrations would fill the queue (every other agent told "busy"), its
// heartbeats the queue of its worker and then the subscription that feeds
// every worker (no agent's heartbeat answered), and either would keep the
// workers writing its record. What the bounds refuse is answered at once
// and counted in ax_agent_requests_refused_total{reason="repeat"}.
const (
	registerMinInterval = time.Second
	registerWaiting     = 1
	heartbeatWaiting    = 2
	heartbeatBurst      = 5
	// refuseRepeat is the ax_agent_requests_refused_total reason of a
	// request refused by its agent's bounds.
	refuseRepeat = "repeat"
)
