package protocol

import (
	"testing"
	"time"
)

func TestReportSubjectShard(t *testing.T) {
	for _, tc := range []struct {
		subject string
		shard   int
		ok      bool
	}{
		{ReportSubject(0, "edge-7"), 0, true},
		{ReportSubject(15, "edge-7"), 15, true},
		{ReportSubject(MaxShards-1, "edge-7"), MaxShards - 1, true},
		{ReportSubject(MaxShards, "edge-7"), 0, false},
		{"ax.rpt.99999.edge-7", 0, false},
		{"ax.rpt.07.edge-7", 0, false},
		{"ax.rpt.-1.edge-7", 0, false},
		{"ax.rpt.x.edge-7", 0, false},
		{"ax.rpt..edge-7", 0, false},
		{"ax.rpt.3", 0, false},
		{"ax.cmd.3.edge-7", 0, false},
		{"ax.rpt.", 0, false},
	} {
		got, ok := ReportSubjectShard(tc.subject)
		if got != tc.shard || ok != tc.ok {
			t.Errorf("ReportSubjectShard(%q) = %d, %t; want %d, %t", tc.subject, got, ok, tc.shard, tc.ok)
		}
	}
}

func TestFencedReportValid(t *testing.T) {
	r := Report{V: Version, Agent: "edge-7", JobID: jobID, ExecID: ExecID(jobID, sched), Attempt: 2, Kind: ReportFenced,
		ScheduledAt: sched, At: sched.Add(time.Second), Epoch: 4, Reason: "lease_moved_on"}
	b, err := Encode(r)
	if err != nil {
		t.Fatalf("encode a fenced report: %v", err)
	}
	got, err := DecodeReport(b)
	if err != nil || got.Kind != ReportFenced || got.Epoch != 4 {
		t.Fatalf("decode a fenced report: %+v, %v", got, err)
	}
}

func TestIsJobRetiredSubject(t *testing.T) {
	job := "ax-t1-20261129120000-aaaaaa"
	for _, c := range []struct {
		subject string
		want    bool
	}{
		{JobRetiredSubject(job), true},                // published and stored
		{"ax.evt.job.retired." + job, true},           // an earlier controller's
		{EventSubject(StateSuccess, job), false},      // an execution's event
		{EventStoredSubject(StateFailed, job), false}, // stored
		{EventStoredSubject("job", job), false},
		{"ax.evt.job.retired.", false},
		{"ax.evt.jobs.x", false},
	} {
		if got := IsJobRetiredSubject(c.subject); got != c.want {
			t.Errorf("IsJobRetiredSubject(%q) = %v, want %v", c.subject, got, c.want)
		}
	}
}
