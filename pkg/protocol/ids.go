package protocol

import (
	"strconv"
	"strings"
	"time"
)

// ID formats.
//
//	job id:     ax-<node>-<yyyymmddhhmmss>-<rand6>   e.g. ax-ctl1-20261129120000-k3x9qa
//	exec id:    <job_id>-<scheduled_unix_ms>         e.g. ax-ctl1-20261129120000-k3x9qa-1796000000000
//	report msg: <exec_id>/<attempt>/<kind>           the JetStream Nats-Msg-Id of a report
//
// An exec id is deterministic: a re-trigger of the same scheduled fire after
// a crash is the same execution, not a new one.
const (
	jobIDPrefix  = "ax-"
	jobIDTimeFmt = "20060102150405"
	randLen      = 6
	base36       = "0123456789abcdefghijklmnopqrstuvwxyz"
	// MaxJobIDLen bounds a job id: "ax-" + node + "-" + 14 digits + "-" + 6.
	MaxJobIDLen = len(jobIDPrefix) + MaxNameLen + 1 + len(jobIDTimeFmt) + 1 + randLen
)

// NewJobID makes a job id for a job created on node at t (UTC) with the
// random number rnd (callers pass rand.Uint32()). The node must satisfy
// ValidateName.
func NewJobID(node string, t time.Time, rnd uint32) string {
	var r [randLen]byte
	n := rnd
	for i := randLen - 1; i >= 0; i-- {
		r[i] = base36[n%36]
		n /= 36
	}
	return jobIDPrefix + node + "-" + t.UTC().Format(jobIDTimeFmt) + "-" + string(r[:])
}

// ValidateJobID checks that id has the form of NewJobID.
func ValidateJobID(field, id string) error {
	if id == "" {
		return invalid(field, "is required")
	}
	if len(id) > MaxJobIDLen {
		return invalid(field, "is %d characters, at most %d allowed", len(id), MaxJobIDLen)
	}
	if !strings.HasPrefix(id, jobIDPrefix) {
		return invalid(field, "%q must have the form ax-<node>-<yyyymmddhhmmss>-<rand6>", id)
	}
	rest := id[len(jobIDPrefix):]
	// Parse from the right: node may contain '-'.
	if len(rest) < 1+1+len(jobIDTimeFmt)+1+randLen {
		return invalid(field, "%q must have the form ax-<node>-<yyyymmddhhmmss>-<rand6>", id)
	}
	rnd := rest[len(rest)-randLen:]
	ts := rest[len(rest)-randLen-1-len(jobIDTimeFmt) : len(rest)-randLen-1]
	node := rest[:len(rest)-randLen-1-len(jobIDTimeFmt)-1]
	if rest[len(rest)-randLen-1] != '-' || rest[len(node)] != '-' {
		return invalid(field, "%q must have the form ax-<node>-<yyyymmddhhmmss>-<rand6>", id)
	}
	if err := ValidateName(field, node); err != nil {
		return invalid(field, "%q has a bad node part", id)
	}
	if !validJobIDTime(ts) {
		return invalid(field, "%q has a bad time part %q", id, ts)
	}
	for i := 0; i < len(rnd); i++ {
		if strings.IndexByte(base36, rnd[i]) < 0 {
			return invalid(field, "%q has a bad random part %q", id, rnd)
		}
	}
	return nil
}

// validJobIDTime reports whether ts is a job id's time part that
// time.Parse(jobIDTimeFmt, ts) takes: 14 digits, yyyymmddhhmmss, each
// field in range (the day within its month). Every report and run names
// a job id, and time.Parse was 1–2 % of the agent's and the controller's
// CPU under the dispatch benchmark (stop 47; BenchmarkValidateJobID
// 129–213 → 54–59 ns and no allocation, with the node checked under
// field's own name). FuzzJobIDTimeMatchesParse and
// TestJobIDTimeMatchesParse hold it to time.Parse.
func validJobIDTime(ts string) bool {
	if len(ts) != len(jobIDTimeFmt) {
		return false
	}
	var v [len(jobIDTimeFmt)]int
	for i := range len(ts) {
		c := ts[i]
		if c < '0' || c > '9' {
			return false
		}
		v[i] = int(c - '0')
	}
	year := v[0]*1000 + v[1]*100 + v[2]*10 + v[3]
	month := time.Month(v[4]*10 + v[5])
	day := v[6]*10 + v[7]
	hour, minute, sec := v[8]*10+v[9], v[10]*10+v[11], v[12]*10+v[13]
	if month < time.January || month > time.December || hour > 23 || minute > 59 || sec > 59 {
		return false
	}
	// The month's last day: the day before the first of the next month.
	last := time.Date(year, month+1, 0, 0, 0, 0, 0, time.UTC).Day()
	return day >= 1 && day <= last
}

// ExecID returns the id of the execution of job jobID scheduled at scheduled.
func ExecID(jobID string, scheduled time.Time) string {
	return jobID + "-" + strconv.FormatInt(scheduled.UnixMilli(), 10)
}

// BroadcastExecID returns the id of one agent's execution of a broadcast
// (mode all) job: every agent of the group fires the same scheduled time, so
// its shard index makes the id unique: <job_id>-<scheduled_unix_ms>_<index>.
func BroadcastExecID(jobID string, scheduled time.Time, index int) string {
	return ExecID(jobID, scheduled) + "_" + strconv.Itoa(index)
}

// ParseExecID splits an exec id (ExecID or BroadcastExecID) into its job id
// and scheduled time.
func ParseExecID(field, execID string) (jobID string, scheduled time.Time, err error) {
	if len(execID) > MaxJobIDLen+32 {
		return "", time.Time{}, invalid(field, "is %d characters, too long for an exec id", len(execID))
	}
	if j := strings.LastIndexByte(execID, '_'); j > 0 && j > strings.LastIndexByte(execID, '-') {
		idx, perr := strconv.Atoi(execID[j+1:])
		if perr != nil || idx < 0 || execID[j+1] == '+' || execID[j+1] == '-' {
			return "", time.Time{}, invalid(field, "%q has a bad shard index", execID)
		}
		execID = execID[:j]
	}
	i := strings.LastIndexByte(execID, '-')
	if i <= 0 || i == len(execID)-1 {
		return "", time.Time{}, invalid(field, "%q must have the form <job_id>-<scheduled_unix_ms>", execID)
	}
	ms, perr := strconv.ParseInt(execID[i+1:], 10, 64)
	if perr != nil || ms < 0 || execID[i+1] == '+' {
		return "", time.Time{}, invalid(field, "%q has a bad scheduled time part", execID)
	}
	jobID = execID[:i]
	if err := ValidateJobID(field, jobID); err != nil {
		return "", time.Time{}, invalid(field, "%q has a bad job id part", execID)
	}
	return jobID, time.UnixMilli(ms).UTC(), nil
}

// ReportMsgID returns the JetStream message id of a report: exec_id/attempt/kind.
// The same step reported twice (a republish after a disconnect) has the same
// id and is de-duplicated by the stream.
func ReportMsgID(execID string, attempt int, kind ReportKind) string {
	return execID + "/" + strconv.Itoa(attempt) + "/" + string(kind)
}

// RunMsgID returns the JetStream message id of the run command of attempt
// of execID for agent (and epoch, for a group job's lease holder):
// run/<exec_id>/<attempt>/<agent>[/<epoch>]. The stream drops a re-send of
// the same run to the same agent; a run pointed at another agent or epoch
// (a group job whose lease moved) is new.
func RunMsgID(execID string, attempt int, agent string, epoch uint64) string {
	id := "run/" + execID + "/" + strconv.Itoa(attempt) + "/" + agent
	if epoch > 0 {
		id += "/" + strconv.FormatUint(epoch, 10)
	}
	return id
}

// RunAgainMsgID returns the message id of a run sent again to an agent
// whose store lost its state, after the command sequence it registered
// with: RunMsgID without epoch + "/after/<seq>", so that it is not dropped
// as a duplicate of the run the agent lost.
func RunAgainMsgID(execID string, attempt int, agent string, after uint64) string {
	return RunMsgID(execID, attempt, agent, 0) + "/after/" + strconv.FormatUint(after, 10)
}

// CancelMsgID returns the message id of the cancel command of attempt of
// execID: cancel/<exec_id>/<attempt>.
func CancelMsgID(execID string, attempt int) string {
	return "cancel/" + execID + "/" + strconv.Itoa(attempt)
}

// EventMsgID returns the message id of the event of an execution's
// transition into state: evt/<exec_id>/<attempt>/<STATE>, so that the
// event of a transition published again (a report redelivered after a
// crash) is dropped by AX_EVT. The PENDING event of a create, which is
// published once, carries it as EventIDHeader instead (no Nats-Msg-Id:
// the stream holds no de-duplication entry for it).
func EventMsgID(execID string, attempt int, to State) string {
	return "evt/" + execID + "/" + strconv.Itoa(attempt) + "/" + string(to)
}

// EventIDHeader is the header that carries the id (EventMsgID) of an event
// published without a Nats-Msg-Id: the PENDING event of a create, which
// has no second publisher for a de-duplication window to drop. Only
// controllers publish events; a reader takes the id from either header.
const EventIDHeader = "Ax-Event-Id"
