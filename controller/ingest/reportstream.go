package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/pkg/protocol"
)

// AX_RPT upkeep. An enrolled agent may publish on ax.rpt.<any token>.<itself>,
// but report consumers exist only for the shard tokens 0 .. max(shards,
// DefaultShards)-1, and AX_RPT takes only their subjects
// (streams.Config.ReportShards): a report on another token is stored
// nowhere. A stream made by an earlier version took every subject ax.rpt.>;
// a report it stored on another token (≥ that, or not a number) is read by
// nobody and would stay in the work queue for ever, taking room from the
// others. The replica that works shard 0 looks at the stream every reportSweepInterval:
// when it holds more reports than the consumers account for, it lists the
// stream's subjects and purges those of tokens no consumer reads, counting
// each report as rejected (bad_shard). Reports on a token a consumer reads
// but not the job's shard are rejected when they are read (lanes.go).
// Every replica also exports the stream's fill and bounds as gauges.
//
// The same replica removes the reports left stored at or below their
// consumer's ack floor. Such a report was applied and acknowledged, and
// the work queue should have removed it, but a kill -9 of the embedded
// server can persist the consumer's ack floor and lose the removal: the
// report is never delivered again nor removed, and takes room from new
// ones (the stream discards new reports when full). The upkeep keeps each
// consumer's ack floor of its previous look; when the consumer's first
// stored report is at or below that floor, the reports of its filter
// subject up to that floor are purged (counted in
// ax_report_stream_acked_removed_total). A report above the floor (not yet
// delivered, or delivered and not acknowledged) is never removed: the ack
// floor only grows, so one read before the purge is never too high. The
// floor of the previous look, not the current one, leaves alone the
// reports acknowledged a moment ago whose removal is under way (a
// replicated stream removes them after the consumer moved its floor):
// they are not counted as left behind.

// defaultReportSweep is how often AX_RPT is looked at.
const defaultReportSweep = 10 * time.Second

// ReportStreamLoop looks after AX_RPT (see the top of reportstream.go)
// every Config.ReportSweep until ctx ends.
func (c *Ingest) ReportStreamLoop(ctx context.Context) {
	every := c.cfg.ReportSweep
	if every <= 0 {
		every = defaultReportSweep
	}
	floors := ackFloors{}
	c.every(ctx, 0, every, "report stream upkeep", func(ctx context.Context) error {
		return c.reportStreamStep(ctx, floors)
	})
}

// ackFloors are the report consumers' ack floors (stream sequences) at
// the upkeep's previous look, by consumer name.
type ackFloors map[string]uint64

// reportStreamStep updates the gauges and, on the owner of shard 0,
// purges the reports at or below their consumer's ack floor in floors
// (updated to the floors now) and the reports of tokens no consumer reads.
func (c *Ingest) reportStreamStep(ctx context.Context, floors ackFloors) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	st, err := c.js.Stream(ctx, protocol.StreamReports)
	if err != nil {
		return fmt.Errorf("read %s: %w", protocol.StreamReports, err)
	}
	info := st.CachedInfo()
	c.m.StreamBytes.Set(float64(info.State.Bytes))
	c.m.StreamMsgs.Set(float64(info.State.Msgs))
	c.m.StreamMaxBytes.Set(float64(info.Config.MaxBytes))
	c.m.StreamMaxAge.Set(info.Config.MaxAge.Seconds())
	oldest := 0.0
	if info.State.Msgs > 0 && !info.State.FirstTime.IsZero() {
		oldest = max(c.now().Sub(info.State.FirstTime).Seconds(), 0)
	}
	c.m.StreamOldest.Set(oldest)
	if info.State.Msgs == 0 || !c.own.Owns(0) {
		return nil
	}
	read := uint64(0) // reports the consumers account for
	infos := make([]*jetstream.ConsumerInfo, 0, max(c.cfg.Shards, protocol.DefaultShards))
	for n := range max(c.cfg.Shards, protocol.DefaultShards) {
		cons, err := c.js.Consumer(ctx, protocol.StreamReports, ConsumerName(n))
		if err != nil {
			return fmt.Errorf("report consumer %d: %w", n, err)
		}
		ci := cons.CachedInfo()
		read += ci.NumPending + uint64(ci.NumAckPending)
		infos = append(infos, ci)
	}
	removed, err := c.purgeAcked(ctx, st, info.State.FirstSeq, infos, floors)
	if err != nil {
		return err
	}
	if read+removed >= info.State.Msgs {
		return nil
	}
	return c.purgeUnread(ctx, st)
}

// purgeAcked removes from AX_RPT the reports at or below their
// consumer's ack floor of the previous look (floors; see the top of the
// file), from first (the stream's first sequence) on, records the floors
// of infos in floors, and returns how many reports it removed.
func (c *Ingest) purgeAcked(ctx context.Context, st jetstream.Stream, first uint64, infos []*jetstream.ConsumerInfo, floors ackFloors) (removed uint64, _ error) {
	var from []string
	defer func() { // also what was removed before an error
		if removed > 0 {
			c.m.StreamAckedRemoved.Add(float64(removed))
			c.log.Info("acknowledged reports removed from "+protocol.StreamReports, "count", removed, "consumers", from,
				"detail", "left stored at or below their consumer's ack floor (a kill of the server lost their removal)")
		}
	}()
	for _, ci := range infos {
		prev, seen := floors[ci.Name]
		floors[ci.Name] = ci.AckFloor.Stream
		// A consumer made again since starts from floor 0: the lower.
		floor, filter := min(prev, ci.AckFloor.Stream), ci.Config.FilterSubject
		if !seen || floor < first || filter == "" {
			continue // nothing stored at or below the floor
		}
		m, err := st.GetMsg(ctx, first, jetstream.WithGetMsgSubject(filter))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return removed, fmt.Errorf("report consumer %s: first report: %w", ci.Name, err)
		}
		if m.Sequence > floor {
			continue
		}
		n, err := c.purgeSubject(ctx, filter, floor+1)
		removed += n
		if n > 0 {
			from = append(from, ci.Name)
		}
		if err != nil {
			return removed, fmt.Errorf("report consumer %s: remove acknowledged reports: %w", ci.Name, err)
		}
	}
	return removed, nil
}

// purgeUnread purges the subjects of AX_RPT whose shard token no report
// consumer reads and counts what was purged.
func (c *Ingest) purgeUnread(ctx context.Context, st jetstream.Stream) error {
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
		n, err := c.purgeSubject(ctx, subj, 0)
		if err != nil {
			return err
		}
		if n == 0 {
			continue
		}
		c.m.ReportsRejected.WithLabelValues(RejectBadShard).Add(float64(n))
		c.m.Rejected.Add(int64(n))
		c.log.Warn("reports rejected", "reason", RejectBadShard, "count", n, "subject", subj,
			"detail", "no report consumer reads this shard token; purged from "+protocol.StreamReports)
	}
	return nil
}

// purgeSubject purges the reports of subject subj of AX_RPT, those below
// sequence before when it is not 0, and returns how many reports the
// server removed (the JetStream API answers it; the client library's
// Purge does not say).
func (c *Ingest) purgeSubject(ctx context.Context, subj string, before uint64) (uint64, error) {
	req, err := json.Marshal(struct {
		Filter string `json:"filter"`
		Seq    uint64 `json:"seq,omitempty"`
	}{subj, before})
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
