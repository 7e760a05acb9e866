package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/internal/kvfollow"
)

// Epoch history (KV ax_epochs, no TTL). A group job's lease key in
// ax_leases names only its current holder, and the bucket TTL removes it
// when nobody renews it (a controller outage longer than lease_ttl). A
// report made under an earlier epoch is still a legitimate execution when
// its agent held that epoch (it fired while its lease was valid; the agent
// itself refuses to fire once its lease ended), so reports are authorized
// by who held their epoch, which this history keeps: per job, the last
// MaxEpochGrants grants (epoch → agent), written before the lease itself,
// so every epoch an agent can learn is in it. It is deleted with the job.

// MaxEpochGrants bounds the grants kept per job: a report under an epoch
// older than the oldest kept is refused (old_epoch).
const MaxEpochGrants = 64

// EpochGrant is one grant of a group job's lease, an element of its
// epoch history.
type EpochGrant struct {
	Epoch uint64    `json:"epoch"`
	Agent string    `json:"agent"`
	At    time.Time `json:"at"`
}

// epochHistory is the value of ax_epochs.<job id>: the job's grants,
// oldest first.
type epochHistory struct {
	Job    string       `json:"job"`
	Grants []EpochGrant `json:"grants"`
}

// last returns the newest grant.
func (h epochHistory) last() (EpochGrant, bool) {
	if len(h.Grants) == 0 {
		return EpochGrant{}, false
	}
	return h.Grants[len(h.Grants)-1], true
}

// HolderOf says what the epoch history knows of who was granted an epoch
// (EpochHolder).
type HolderOf int

const (
	// EpochNeverGranted: no grant of the epoch is known.
	EpochNeverGranted HolderOf = iota
	// EpochGranted: the epoch's holder is known.
	EpochGranted
	// EpochForgotten: the epoch is older than the oldest grant kept
	// (MaxEpochGrants).
	EpochForgotten
)

// holder returns the agent granted epoch and, when a later epoch was
// granted since, when that was (the epoch ended before: its holder's own
// lease ends before the controller grants the next one).
func (h epochHistory) holder(epoch uint64) (agent string, st HolderOf, endedBy time.Time) {
	if len(h.Grants) == 0 {
		return "", EpochNeverGranted, time.Time{}
	}
	// Newest first: reports are usually of the current or a recent epoch.
	for i := len(h.Grants) - 1; i >= 0; i-- {
		if g := h.Grants[i]; g.Epoch == epoch {
			if i+1 < len(h.Grants) {
				endedBy = h.Grants[i+1].At
			}
			return g.Agent, EpochGranted, endedBy
		}
	}
	if epoch < h.Grants[0].Epoch && len(h.Grants) >= MaxEpochGrants {
		return "", EpochForgotten, time.Time{}
	}
	return "", EpochNeverGranted, time.Time{}
}

// epochView mirrors ax_epochs in memory (one watcher; the writer puts its
// own writes at once).
type epochView struct {
	mu   sync.RWMutex
	jobs map[string]epochSeen
}

type epochSeen struct {
	h   epochHistory
	rev uint64
}

func newEpochView() *epochView { return &epochView{jobs: map[string]epochSeen{}} }

func (v *epochView) apply(e jetstream.KeyValueEntry) {
	if e.Operation() != jetstream.KeyValuePut {
		v.drop(e.Key(), e.Revision())
		return
	}
	var h epochHistory
	if err := json.Unmarshal(e.Value(), &h); err != nil {
		return
	}
	v.put(e.Key(), h, e.Revision())
}

func (v *epochView) put(job string, h epochHistory, rev uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if cur, ok := v.jobs[job]; !ok || rev > cur.rev {
		v.jobs[job] = epochSeen{h: h, rev: rev}
	}
}

func (v *epochView) drop(job string, rev uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if cur, ok := v.jobs[job]; ok && cur.rev <= rev {
		delete(v.jobs, job)
	}
}

func (v *epochView) get(job string) (epochSeen, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	s, ok := v.jobs[job]
	return s, ok
}

// jobIDs returns the jobs with a history.
func (v *epochView) jobIDs() []string {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make([]string, 0, len(v.jobs))
	for id := range v.jobs {
		out = append(out, id)
	}
	return out
}

// FollowEpochs loads ax_epochs into the epoch view and keeps it current
// (a watcher on the context given to Attach, started with GoRun); it
// returns once the view holds the bucket. Call it once, after Attach.
func (g *GroupLeases) FollowEpochs(ctx context.Context) error {
	w, err := g.kv.Epochs.WatchAll(g.ctx)
	if err != nil {
		return err
	}
	return kvfollow.Follow(ctx, w, g.epochs.apply, 1, g.goRun)
}

// RecordGrant appends (epoch → agent) to job's history before the lease
// is written (every grant of Manage does), and returns the grant before it
// (ok false: none). A history that other writers keep changing under it
// gives an error matching ErrConflict.
func (g *GroupLeases) RecordGrant(ctx context.Context, job, agent string, epoch uint64) (prev EpochGrant, ok bool, err error) {
	// It runs on the ownership loop: bounded like the lease writes, so a
	// slow cluster cannot hold up the renewals of the shard leases.
	ctx, cancel := context.WithTimeout(ctx, 2*WriteTimeout(g.cfg.LeaseTTL))
	defer cancel()
	for range 5 {
		cur, have := g.epochs.get(job)
		prev, ok = cur.h.last()
		h := epochHistory{Job: job, Grants: append(cur.h.Grants[:len(cur.h.Grants):len(cur.h.Grants)],
			EpochGrant{Epoch: epoch, Agent: agent, At: g.now()})}
		if n := len(h.Grants); n > MaxEpochGrants {
			h.Grants = h.Grants[n-MaxEpochGrants:]
		}
		data, err := json.Marshal(h)
		if err != nil {
			return prev, ok, err
		}
		var rev uint64
		if have {
			rev, err = g.kv.Epochs.Update(ctx, job, data, cur.rev)
		} else {
			rev, err = g.kv.Epochs.Create(ctx, job, data)
		}
		if err == nil {
			g.epochs.put(job, h, rev)
			return prev, ok, nil
		}
		if !IsCASMiss(err) && !errors.Is(err, jetstream.ErrKeyExists) {
			return prev, ok, fmt.Errorf("record lease grant of %s: %w", job, err)
		}
		// Written meanwhile (by another replica, or the view lags): read it.
		if err := g.refreshEpochs(ctx, job); err != nil {
			return prev, ok, err
		}
	}
	return prev, ok, fmt.Errorf("record lease grant of %s: %w: too much contention", job, ErrConflict)
}

// refreshEpochs reads job's history from KV into the view.
func (g *GroupLeases) refreshEpochs(ctx context.Context, job string) error {
	e, err := g.kv.Epochs.Get(ctx, job)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read lease grants of %s: %w", job, err)
	}
	g.epochs.apply(e)
	return nil
}

// EpochHolder returns who was granted epoch of job, and when the epoch
// ended (zero when no later epoch was granted: the next grant's time,
// before which its holder's own lease had ended), from the view, else (an
// epoch newer than the view knows: granted by another replica just now)
// from KV, else from the current lease (granted before the history
// existed). It never blocks when the view knows the epoch. Safe for
// concurrent use.
func (g *GroupLeases) EpochHolder(ctx context.Context, job string, epoch uint64) (string, HolderOf, time.Time) {
	s, ok := g.epochs.get(job)
	agent, st, ended := s.h.holder(epoch)
	if st != EpochNeverGranted {
		return agent, st, ended
	}
	if last, has := s.h.last(); !ok || !has || epoch > last.Epoch {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := g.refreshEpochs(rctx, job)
		cancel()
		if err == nil {
			s, _ = g.epochs.get(job)
			if agent, st, ended = s.h.holder(epoch); st != EpochNeverGranted {
				return agent, st, ended
			}
		}
	}
	if l, ok := g.leases.Job(job); ok && l.Val.Epoch == epoch {
		return l.Val.Agent, EpochGranted, time.Time{}
	}
	return "", EpochNeverGranted, time.Time{}
}

// dropEpochs deletes the history of a job that is no longer a group job.
func (g *GroupLeases) dropEpochs(ctx context.Context, job string) {
	s, ok := g.epochs.get(job)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, WriteTimeout(g.cfg.LeaseTTL))
	defer cancel()
	if err := g.kv.Epochs.Delete(ctx, job, jetstream.LastRevision(s.rev)); err != nil && !IsCASMiss(err) {
		g.log.Warn("delete lease grants", "job", job, "err", err)
		return
	}
	g.epochs.drop(job, s.rev)
}

// CurrentHolder returns the agent holding job's group lease now, and its
// epoch: a lease not released and renewed within LeaseTTL (ok false: none).
// Safe for concurrent use.
func (g *GroupLeases) CurrentHolder(job string) (string, uint64, bool) {
	l, ok := g.leases.Job(job)
	if !ok || l.Val.Released || g.mono().Sub(l.Seen) >= g.cfg.LeaseTTL {
		return "", 0, false
	}
	return l.Val.Agent, l.Val.Epoch, true
}
