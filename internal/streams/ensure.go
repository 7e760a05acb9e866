package streams

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/pkg/protocol"
)

// Ensure creates or updates the streams and buckets; calling it again with
// the same config changes nothing. A stream or bucket whose stored config
// is the one Ensure last applied with these settings (ConfigKey) is left
// as it is: a start of a controller after its first asks the server for no
// update (each rewrites the stream's meta file, and one of a stream with a
// MaxAge reads its first message block: with a long history, megabytes).
func Ensure(ctx context.Context, js jetstream.JetStream, cfg Config) (Buckets, error) {
	if err := cfg.Validate(); err != nil {
		return Buckets{}, err
	}
	for _, sc := range cfg.StreamConfigs() {
		digest, err := configDigest(sc)
		if err != nil {
			return Buckets{}, fmt.Errorf("ensure stream %s: %w", sc.Name, err)
		}
		have, err := storedConfig(ctx, js, sc.Name)
		if err != nil {
			return Buckets{}, fmt.Errorf("ensure stream %s: %w", sc.Name, err)
		}
		if have != nil && have.Metadata[ConfigKey] == digest {
			continue
		}
		if have != nil && sc.Name == protocol.StreamReports {
			keepMetadata(have, &sc, ReportShardsKey)
		}
		setMetadata(&sc.Metadata, ConfigKey, digest)
		if _, err := js.CreateOrUpdateStream(ctx, sc); err != nil {
			return Buckets{}, fmt.Errorf("ensure stream %s: %w", sc.Name, err)
		}
	}
	// Per-message TTLs need JetStream API level 1 (nats-server 2.11).
	info, err := js.AccountInfo(ctx)
	if err != nil {
		return Buckets{}, fmt.Errorf("ensure buckets: %w", err)
	}
	serverTTL := info.API.Level >= 1
	b := Buckets{MsgTTL: true}
	dst := []*jetstream.KeyValue{&b.Jobs, &b.Execs, &b.Idem, &b.Agents, &b.Leases, &b.Epochs, &b.Liveness, &b.Marks}
	for i, kc := range cfg.KVConfigs() {
		kv, ttl, err := ensureBucket(ctx, js, kc, serverTTL)
		if err != nil {
			return Buckets{}, fmt.Errorf("ensure bucket %s: %w", kc.Bucket, err)
		}
		*dst[i] = kv
		if kc.LimitMarkerTTL > 0 && !ttl {
			b.MsgTTL = false
		}
	}
	return b, nil
}

// ensureBucket binds bucket kc when its stream has the config Ensure last
// applied (ConfigKey, and KVDuplicates), and creates or updates it
// otherwise; ttl is whether the bucket's stream takes per-message TTLs.
//
// kc's LimitMarkerTTL (MarkerTTL) is left out of the digest, so that an ax
// built before it, whose digest is the same, binds the bucket as it is
// instead of updating it without TTLs, which the server refuses once a
// stream takes them: rolling back stays possible. A bucket bound with the
// digest but without TTLs (made by such an ax) is given them by an update
// of its own. A server that has no per-message TTLs (JetStream API level
// 0: before 2.11; serverTTL false) gets the bucket without.
func ensureBucket(ctx context.Context, js jetstream.JetStream, kc jetstream.KeyValueConfig, serverTTL bool) (kv jetstream.KeyValue, ttl bool, err error) {
	markerTTL := kc.LimitMarkerTTL
	kc.LimitMarkerTTL = 0
	digest, err := configDigest(kc)
	if err != nil {
		return nil, false, err
	}
	if !serverTTL {
		markerTTL = 0
	}
	have, err := storedConfig(ctx, js, KVStream(kc.Bucket))
	if err != nil {
		return nil, false, err
	}
	if have != nil && have.Metadata[ConfigKey] == digest && have.Duplicates == KVDuplicates {
		if markerTTL > 0 && !have.AllowMsgTTL {
			if err := allowMsgTTL(ctx, js, *have, markerTTL); err != nil {
				return nil, false, err
			}
		}
		kv, err := js.KeyValue(ctx, kc.Bucket)
		return kv, markerTTL > 0 || have.AllowMsgTTL, err
	}
	setMetadata(&kc.Metadata, ConfigKey, digest)
	if have != nil && have.AllowMsgTTL {
		markerTTL = max(markerTTL, have.SubjectDeleteMarkerTTL, time.Second)
	}
	kc.LimitMarkerTTL = markerTTL
	kv, err = js.CreateOrUpdateKeyValue(ctx, kc)
	if err != nil {
		return nil, false, err
	}
	if err := shortenDuplicates(ctx, js, KVStream(kc.Bucket)); err != nil {
		return nil, false, err
	}
	return kv, markerTTL > 0, nil
}

// allowMsgTTL updates the stream of config cfg to take per-message TTLs
// as a bucket with LimitMarkerTTL d has them.
func allowMsgTTL(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig, d time.Duration) error {
	cfg.AllowMsgTTL, cfg.SubjectDeleteMarkerTTL = true, d
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("allow message TTLs: %w", err)
	}
	return nil
}

// ConfigKey is the key of a stream's metadata where Ensure records a digest
// of the config it applied (the stream's, or the bucket's), so that a
// later Ensure with the same settings leaves the stream alone. A config of
// another version of ax, or with other settings, has another digest and is
// applied.
const ConfigKey = "ax_config"

// configDigest returns the digest of cfg that Ensure records under
// ConfigKey: SHA-256 of its JSON, the first 16 bytes in hex.
func configDigest(cfg any) (string, error) {
	b, err := json.Marshal(cfg)
	if err != nil {
		return "", fmt.Errorf("config digest: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16]), nil
}

// storedConfig returns the config the server holds for stream name, nil
// when there is no such stream.
func storedConfig(ctx context.Context, js jetstream.JetStream, name string) (*jetstream.StreamConfig, error) {
	st, err := js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	cfg := st.CachedInfo().Config
	return &cfg, nil
}

// setMetadata sets key k of *m to v, making the map when there is none.
func setMetadata(m *map[string]string, k, v string) {
	if *m == nil {
		*m = map[string]string{}
	}
	(*m)[k] = v
}

// ReportShardsKey is the key of AX_RPT's metadata that records the shard
// count its report consumers were made for (controller/ingest writes and
// checks it; the count is fixed once the stream exists). The report
// consumers keep their state in memory, so the stream, not a consumer,
// has to remember it across a restart of the server.
const ReportShardsKey = "ax_shards"

// keepMetadata copies the keys of the stream's stored metadata (have) into
// sc, so that Ensure's update keeps what another part of ax recorded there
// instead of dropping it.
func keepMetadata(have *jetstream.StreamConfig, sc *jetstream.StreamConfig, keys ...string) {
	for _, k := range keys {
		if v, ok := have.Metadata[k]; ok {
			setMetadata(&sc.Metadata, k, v)
		}
	}
}

// shortenDuplicates sets the de-duplication window of the bucket stream
// name to KVDuplicates. nats.go's CreateOrUpdateKeyValue sets its own
// window each time, so a start updates the stream twice; the server
// recovers a stream with the window it last stored, this one.
func shortenDuplicates(ctx context.Context, js jetstream.JetStream, name string) error {
	st, err := js.Stream(ctx, name)
	if err != nil {
		return fmt.Errorf("duplicate window: %w", err)
	}
	cfg := st.CachedInfo().Config
	if cfg.Duplicates == KVDuplicates {
		return nil
	}
	cfg.Duplicates = KVDuplicates
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("duplicate window: %w", err)
	}
	return nil
}
