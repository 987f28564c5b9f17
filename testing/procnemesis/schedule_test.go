package procnemesis

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/testing/nemesis/core"
)

// TestScheduleFromSeed: a seed gives one schedule; its steps start in
// order, end within the bounds, never overlap more than allowed, hold a
// client pause past the lease, and a schedule with at least as many steps
// as kinds has every kind (the deck).
func TestScheduleFromSeed(t *testing.T) {
	for _, long := range []bool{false, true} {
		p := plan{core.Plan{Duration: shortDuration, Long: long}}
		if long {
			p.Duration = 60 * time.Second
		}
		b := p.bounds()
		for seed := uint64(0); seed < 50; seed++ {
			s := core.NewSchedule(seed, b)
			if !reflect.DeepEqual(s, core.NewSchedule(seed, b)) {
				t.Fatalf("seed %d: two different schedules", seed)
			}
			if len(s.Steps) == 0 {
				t.Fatalf("seed %d: no steps", seed)
			}
			for i, st := range s.Steps {
				if i > 0 && st.At < s.Steps[i-1].At {
					t.Fatalf("seed %d: step %d starts before step %d", seed, i+1, i)
				}
				if st.At+st.Hold > b.Duration || st.Hold < b.MinHold {
					t.Fatalf("seed %d: step %s outside the bounds %+v", seed, st, b)
				}
				if st.Kind == core.PauseClient && st.Hold < b.PauseMin {
					t.Fatalf("seed %d: a client pause of %v, shorter than %v", seed, st.Hold, b.PauseMin)
				}
				active := 0
				for _, o := range s.Steps {
					if o.At <= st.At && st.At < o.At+o.Hold {
						active++
					}
				}
				if active > b.MaxOverlap {
					t.Fatalf("seed %d: %d steps active at %v, at most %d allowed", seed, active, st.At, b.MaxOverlap)
				}
			}
			if len(s.Steps) >= len(core.ProcessKinds)+1 {
				// The first numKinds draws are one deck; one PauseClient may
				// have been swapped for lack of room, which costs a draw.
				kinds := s.Kinds()
				missing := 0
				for _, k := range core.ProcessKinds {
					if kinds[k] == 0 {
						missing++
					}
				}
				if missing > 1 {
					t.Fatalf("seed %d: %d steps but %d kinds missing: %v", seed, len(s.Steps), missing, kinds)
				}
			}
			if !strings.Contains(s.String(), "CHUBBY_NEMESIS_SEED=") {
				t.Fatalf("the schedule does not say how to replay it: %s", s)
			}
		}
	}
	b := plan{core.Plan{Duration: shortDuration}}.bounds()
	if core.NewSchedule(1, b).String() == core.NewSchedule(2, b).String() {
		t.Errorf("seeds 1 and 2 drew the same schedule")
	}
}

// TestPlanFromEnv: the variables mean what they mean for testing/nemesis.
func TestPlanFromEnv(t *testing.T) {
	for _, v := range []string{"CHUBBY_NEMESIS_LONG", "CHUBBY_NEMESIS_SCHEDULES", "CHUBBY_NEMESIS_SECONDS", "CHUBBY_NEMESIS_SEED"} {
		t.Setenv(v, "")
	}
	p := planFromEnv(t)
	if !reflect.DeepEqual(p.Seeds, shortSeeds) || p.Duration != shortDuration || p.Long || p.Explicit {
		t.Fatalf("default plan %+v", p)
	}
	t.Setenv("CHUBBY_NEMESIS_LONG", "1")
	p = planFromEnv(t)
	if len(p.Seeds) != 20 || p.Duration != 60*time.Second || !p.Long {
		t.Fatalf("long plan %+v", p)
	}
	t.Setenv("CHUBBY_NEMESIS_SCHEDULES", "2")
	t.Setenv("CHUBBY_NEMESIS_SECONDS", "45")
	p = planFromEnv(t)
	if len(p.Seeds) != 2 || p.Duration != 45*time.Second || !p.Long {
		t.Fatalf("long plan with overrides %+v", p)
	}
	t.Setenv("CHUBBY_NEMESIS_SEED", "77")
	p = planFromEnv(t)
	if !reflect.DeepEqual(p.Seeds, []uint64{77}) || p.Duration != 45*time.Second || !p.Explicit {
		t.Fatalf("replay plan %+v", p)
	}
}
