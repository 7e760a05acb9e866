package harness

import (
	"os"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	if IsChild() {
		RunChild()
		return
	}
	os.Exit(m.Run())
}

// TestSpawn runs every kind and mode in a real child process, at tiny
// sizes, and checks the figures are plausible.
func TestSpawn(t *testing.T) {
	type spawnCase struct {
		spec  Spec
		check func(t *testing.T, r Result)
	}
	var cases []spawnCase
	for _, m := range []string{ModeWheel, ModeDriver, ModeDriverNow, ModeAfterFunc, ModeGoroutine} {
		cases = append(cases, spawnCase{Spec{Kind: KindPending, Mode: m, N: 2000, MinDelay: time.Hour, MaxDelay: 2 * time.Hour}, func(t *testing.T, r Result) {
			if r.NsPerInsert <= 0 || r.NsPerInsertCold <= 0 || r.Fired != 0 {
				t.Fatalf("implausible: %+v", r)
			}
		}})
	}
	for _, m := range []string{ModeDriver, ModeDriverFine, ModeAfterFunc, ModeGoroutine} {
		cases = append(cases, spawnCase{Spec{Kind: KindLateness, Mode: m, N: 200, MinDelay: 10 * time.Millisecond, MaxDelay: 50 * time.Millisecond}, func(t *testing.T, r Result) {
			if r.Fired != 200 || r.Early != 0 || r.P50 > r.P99 || r.P99 > r.Max {
				t.Fatalf("implausible: %+v", r)
			}
		}})
	}
	for _, m := range []string{ModeBaseline, ModeEmpty, ModeDriver, ModeAfterFunc} {
		cases = append(cases, spawnCase{Spec{Kind: KindIdle, Mode: m, N: 1000, MinDelay: time.Hour, MaxDelay: 2 * time.Hour, Idle: 20 * time.Millisecond}, func(t *testing.T, r Result) {
			if r.CPU < 0 || r.Fired != 0 {
				t.Fatalf("implausible: %+v", r)
			}
		}})
	}
	for _, tc := range cases {
		t.Run(tc.spec.Kind+"/"+tc.spec.Mode, func(t *testing.T) {
			r, err := Spawn(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, r)
		})
	}
}

func TestSpawnReportsChildErrors(t *testing.T) {
	if _, err := Spawn(Spec{Kind: "nonsense", Mode: ModeWheel, N: 1}); err == nil {
		t.Fatal("Spawn of an unknown kind succeeded")
	}
	if _, err := Spawn(Spec{Kind: KindPending, Mode: "nonsense", N: 1, MaxDelay: time.Second}); err == nil {
		t.Fatal("Spawn of an unknown mode succeeded")
	}
}
