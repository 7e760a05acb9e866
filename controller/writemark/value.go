package writemark

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/axsched/ax/pkg/protocol"
)

// Version is the version of Value; a reader refuses a value of a later one.
const Version = 1

// Value is what a controller process stores under its key in ax_marks.
type Value struct {
	V int `json:"v"`
	// Node and Instance name the process (Key).
	Node     string `json:"node"`
	Instance string `json:"instance"`
	// Through, Open and Failed are its Mark when stored.
	Through time.Time `json:"through"`
	Open    int       `json:"open"`
	Failed  int       `json:"failed"`
	// Covered lists, in order, the shards whose records a reload has
	// checked since the process died (written by the replicas that did):
	// once every shard is covered, nothing the process wrote can lack its
	// effects, and the key is removed.
	Covered []int `json:"covered,omitempty"`
}

// Key is the key of a process's mark: node and instance, both names of
// the characters a KV key allows (protocol.ValidateName, hex).
func Key(node, instance string) string { return node + "." + instance }

// Encode returns v as stored.
func Encode(v Value) ([]byte, error) {
	v.V = Version
	if err := v.validate(); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// Decode reads a stored value and checks it.
func Decode(data []byte) (Value, error) {
	var v Value
	if err := json.Unmarshal(data, &v); err != nil {
		return Value{}, fmt.Errorf("write mark: %w", err)
	}
	if v.V < 1 || v.V > Version {
		return Value{}, fmt.Errorf("write mark: v: version %d not supported (1..%d)", v.V, Version)
	}
	if err := v.validate(); err != nil {
		return Value{}, err
	}
	return v, nil
}

func (v Value) validate() error {
	if err := protocol.ValidateName("node", v.Node); err != nil {
		return fmt.Errorf("write mark: %w", err)
	}
	if v.Instance == "" {
		return fmt.Errorf("write mark: instance: empty")
	}
	if v.Through.IsZero() {
		return fmt.Errorf("write mark: through: zero")
	}
	if v.Open < 0 || v.Failed < 0 || v.Failed > v.Open {
		return fmt.Errorf("write mark: open %d, failed %d: counts out of range", v.Open, v.Failed)
	}
	for i, s := range v.Covered {
		if s < 0 || s >= protocol.MaxShards || i > 0 && s <= v.Covered[i-1] {
			return fmt.Errorf("write mark: covered[%d]: shard %d out of range or order", i, s)
		}
	}
	return nil
}

// Cover returns v with shards added to Covered (in order, once each).
func (v Value) Cover(shards []int) Value {
	set := map[int]bool{}
	for _, s := range v.Covered {
		set[s] = true
	}
	for _, s := range shards {
		set[s] = true
	}
	out := make([]int, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	slices.Sort(out)
	v.Covered = out
	return v
}

// Oldest returns the smallest Through of vs; ok is false when vs is empty.
func Oldest(vs []Value) (t time.Time, ok bool) {
	for _, v := range vs {
		if !ok || v.Through.Before(t) {
			t, ok = v.Through, true
		}
	}
	return t, ok
}

// VerifiedKey is the key in ax_marks of the Verified value; the process
// keys (Key) always hold a dot, this one does not.
const VerifiedKey = "untracked-verified"

// Verified says how far the records of earlier versions (not Tracked) are
// checked: a reload of every shard that checked them stores the time its
// scan began, and later reloads check only those written after it.
//
// None is set when that reload found no such record at all: a store made
// or emptied of them by this version. A reload may then leave out of
// its read the records written long before the write marks (the history
// index stands in for them, controller/reloadindex.go) as long as it
// finds no untracked record among those it reads (an earlier version
// writing again, as in a rollback, clears it at the next reload of
// every shard).
type Verified struct {
	V       int       `json:"v"`
	Through time.Time `json:"through"`
	None    bool      `json:"none,omitempty"`
}

// EncodeVerified returns v as stored.
func EncodeVerified(v Verified) ([]byte, error) {
	v.V = Version
	if v.Through.IsZero() {
		return nil, fmt.Errorf("untracked verified: through: zero")
	}
	return json.Marshal(v)
}

// DecodeVerified reads a stored Verified and checks it.
func DecodeVerified(data []byte) (Verified, error) {
	var v Verified
	if err := json.Unmarshal(data, &v); err != nil {
		return Verified{}, fmt.Errorf("untracked verified: %w", err)
	}
	if v.V < 1 || v.V > Version {
		return Verified{}, fmt.Errorf("untracked verified: v: version %d not supported (1..%d)", v.V, Version)
	}
	if v.Through.IsZero() {
		return Verified{}, fmt.Errorf("untracked verified: through: zero")
	}
	return v, nil
}
