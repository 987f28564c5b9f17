package nemesis

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/testing/nemesis/core"
)

// TestScheduleFromSeed: a seed gives one schedule, which keeps its bounds
// and composition rules, overlaps faults, and seeds between them draw every
// kind of fault.
func TestScheduleFromSeed(t *testing.T) {
	b := bounds(30*time.Second+settle, 3, false)
	seen := map[core.Kind]bool{}
	overlaps := 0
	for seed := uint64(0); seed < 20; seed++ {
		s := core.NewSchedule(seed, b)
		if !reflect.DeepEqual(s, core.NewSchedule(seed, b)) {
			t.Fatalf("seed %d: two different schedules", seed)
		}
		if len(s.Steps) == 0 {
			t.Fatalf("seed %d: no step", seed)
		}
		for i, st := range s.Steps {
			seen[st.Kind] = true
			if st.End() > b.Duration || st.Hold <= 0 {
				t.Fatalf("seed %d: step %s ends after %v", seed, st, b.Duration)
			}
			if i > 0 && st.At < s.Steps[i-1].At {
				t.Fatalf("seed %d: steps out of order", seed)
			}
			switch st.Kind {
			case core.PauseClient:
				if st.Hold < b.PauseMin || st.Hold > b.PauseMax {
					t.Fatalf("seed %d: pause-holder held %v, outside [%v, %v]", seed, st.Hold, b.PauseMin, b.PauseMax)
				}
			case core.ServerDrift, core.ClientDrift:
				if d := math.Abs(st.Rate - 1); d > b.MaxDrift || d == 0 {
					t.Fatalf("seed %d: drift rate %v, bound ±%v", seed, st.Rate, b.MaxDrift)
				}
			case core.ClientClockJump:
				if st.Jump <= 0 || st.Jump > b.RegJumpMax || st.Target < b.LockClients && st.Jump > b.LockJumpMax {
					t.Fatalf("seed %d: client jump %s", seed, st)
				}
			case core.ServerClockJump:
				if st.Hold > b.MaxStall {
					t.Fatalf("seed %d: stall of %v, bound %v", seed, st.Hold, b.MaxStall)
				}
				fallthrough
			case core.KillServer, core.PauseServer, core.SlowDisk:
				if st.Target < 0 || st.Target >= 2*b.Servers {
					t.Fatalf("seed %d: target of %s", seed, st)
				}
			case core.OneWay:
				if st.Target == st.Peer {
					t.Fatalf("seed %d: %s", seed, st)
				}
			}
			for _, o := range s.Steps[i+1:] {
				if o.At >= st.End() {
					continue
				}
				overlaps++
				if o.Kind == st.Kind {
					t.Fatalf("seed %d: two %s active at once: %s and %s", seed, st.Kind, st, o)
				}
				if o.Kind.Down() && st.Kind.Down() {
					t.Fatalf("seed %d: two servers down at once: %s and %s", seed, st, o)
				}
			}
		}
		if !strings.Contains(s.String(), "CHUBBY_NEMESIS_SEED=") {
			t.Fatalf("the schedule does not say how to replay it: %s", s)
		}
	}
	for _, k := range core.InProcessKinds {
		if !seen[k] {
			t.Errorf("no schedule of 20 seeds drew %s", k)
		}
	}
	if overlaps == 0 {
		t.Error("no two faults of 20 schedules overlap")
	}
	if core.NewSchedule(1, b).String() == core.NewSchedule(2, b).String() {
		t.Errorf("seeds 1 and 2 drew the same schedule")
	}
}

// TestShortPlanDrawsEveryKind: the schedules of `go test`'s fixed seeds
// draw every kind of fault between them.
func TestShortPlanDrawsEveryKind(t *testing.T) {
	got := map[core.Kind]int{}
	for _, seed := range shortSeeds {
		for k, n := range core.NewSchedule(seed, bounds(shortDuration, 3, false)).Kinds() {
			got[k] += n
		}
	}
	for _, k := range core.InProcessKinds {
		if got[k] == 0 {
			t.Errorf("the short plan (seeds %v) draws no %s", shortSeeds, k)
		}
	}
	t.Logf("short plan: %s", core.CountString(got))
}
