package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/pkg/protocol"
)

// AX_RPT upkeep. The stream takes every subject ax.rpt.> and an enrolled
// agent may publish on ax.rpt.<any token>.<itself>, but report consumers
// exist only for the shard tokens 0 .. max(shards, DefaultShards)-1: a
// report on another token (≥ that, or not a number) is read by nobody and
// would stay in the work queue for ever, taking room from the others. The
// replica that works shard 0 looks at the stream every reportSweepInterval:
// when it holds more reports than the consumers account for, it lists the
// stream's subjects and purges those of tokens no consumer reads, counting
// each report as rejected (bad_shard). Reports on a token a consumer reads
// but not the job's shard are rejected when they are read (lanes.go).
// Every replica also exports the stream's fill and bounds as gauges.

// defaultReportSweep is how often AX_RPT is looked at.
const defaultReportSweep = 10 * time.Second

// reportStreamLoop runs reportStreamStep until ctx ends.
func (c *reportIngest) reportStreamLoop(ctx context.Context) {
	every := c.cfg.reportSweep
	if every <= 0 {
		every = defaultReportSweep
	}
	c.every(ctx, 0, every, "report stream upkeep", c.reportStreamStep)
}

// reportStreamStep updates the gauges and, on the owner of shard 0,
// purges the reports of tokens no consumer reads.
func (c *reportIngest) reportStreamStep(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	st, err := c.js.Stream(ctx, protocol.StreamReports)
	if err != nil {
		return fmt.Errorf("read %s: %w", protocol.StreamReports, err)
	}
	info := st.CachedInfo()
	c.m.rptBytes.Set(float64(info.State.Bytes))
	c.m.rptMsgs.Set(float64(info.State.Msgs))
	c.m.rptMaxBytes.Set(float64(info.Config.MaxBytes))
	c.m.rptMaxAge.Set(info.Config.MaxAge.Seconds())
	oldest := 0.0
	if info.State.Msgs > 0 && !info.State.FirstTime.IsZero() {
		oldest = max(c.now().Sub(info.State.FirstTime).Seconds(), 0)
	}
	c.m.rptOldest.Set(oldest)
	if info.State.Msgs == 0 || !c.own.owns(0) {
		return nil
	}
	read := uint64(0) // reports the consumers account for
	for n := range max(c.cfg.Shards, protocol.DefaultShards) {
		cons, err := c.js.Consumer(ctx, protocol.StreamReports, shardConsumerName(n))
		if err != nil {
			return fmt.Errorf("report consumer %d: %w", n, err)
		}
		ci := cons.CachedInfo()
		read += ci.NumPending + uint64(ci.NumAckPending)
	}
	if read >= info.State.Msgs {
		return nil
	}
	return c.purgeUnread(ctx, st)
}

// purgeUnread purges the subjects of AX_RPT whose shard token no report
// consumer reads and counts what was purged.
func (c *reportIngest) purgeUnread(ctx context.Context, st jetstream.Stream) error {
	full, err := st.Info(ctx, jetstream.WithSubjectFilter(protocol.SubjectReportsAll))
	if err != nil {
		return fmt.Errorf("list %s subjects: %w", protocol.StreamReports, err)
	}
	read := max(c.cfg.Shards, protocol.DefaultShards)
	var bad []string
	for subj := range full.State.Subjects {
		if n, ok := protocol.ReportSubjectShard(subj); !ok || n >= read {
			bad = append(bad, subj)
		}
	}
	sort.Strings(bad)
	for _, subj := range bad {
		n, err := c.purgeSubject(ctx, subj)
		if err != nil {
			return err
		}
		if n == 0 {
			continue
		}
		c.m.reportsRejected.WithLabelValues(rejectBadShard).Add(float64(n))
		c.m.rejected.Add(int64(n))
		c.log.Warn("reports rejected", "reason", rejectBadShard, "count", n, "subject", subj,
			"detail", "no report consumer reads this shard token; purged from "+protocol.StreamReports)
	}
	return nil
}

// purgeSubject purges one subject of AX_RPT and returns how many reports
// the server removed (the JetStream API answers it; the client library's
// Purge does not say).
func (c *reportIngest) purgeSubject(ctx context.Context, subj string) (uint64, error) {
	req, err := json.Marshal(struct {
		Filter string `json:"filter"`
	}{subj})
	if err != nil {
		return 0, err
	}
	msg, err := c.nc.RequestWithContext(ctx, "$JS.API.STREAM.PURGE."+protocol.StreamReports, req)
	if err != nil {
		return 0, fmt.Errorf("purge %s: %w", subj, err)
	}
	var resp struct {
		Success bool   `json:"success"`
		Purged  uint64 `json:"purged"`
		Error   *struct {
			Code        int    `json:"code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return 0, fmt.Errorf("purge %s: answer: %w", subj, err)
	}
	if resp.Error != nil || !resp.Success {
		desc := "not successful"
		if resp.Error != nil {
			desc = strconv.Itoa(resp.Error.Code) + " " + resp.Error.Description
		}
		return 0, fmt.Errorf("purge %s: %s", subj, desc)
	}
	return resp.Purged, nil
}
