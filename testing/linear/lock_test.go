package linear

// The lock model (DESIGN invariants 1 and 2; Chubby §2.4, sequencers):
// hand-built histories that a correct cell may produce pass, each kind of
// violation is Illegal, the failure path leaves a visualization and a
// window naming the culprit, histories of a reference lock observed
// through random call and return times always pass (and long ones check
// fast), and the model's pruning of its state sets changes no verdict.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"pgregory.net/rapid"
)

const (
	lockA = "/ls/local/jobs/a/lock"
	lockB = "/ls/local/jobs/b/lock"
)

// Builders of hand-made lock histories, on lockA unless said otherwise.

func acq(client, s int, sh bool, gen uint64, call, ret int64) porcupine.Operation {
	return LockOperation(client, LockInput{Kind: LockAcquire, Lock: lockA, Session: s, Shared: sh}, LockOutput{OK: true, Gen: gen}, call, ret)
}

func acqFail(client, s int, sh bool, call, ret int64) porcupine.Operation {
	return LockOperation(client, LockInput{Kind: LockAcquire, Lock: lockA, Session: s, Shared: sh}, LockOutput{}, call, ret)
}

func acqUnknown(client, s int, sh bool, call int64) porcupine.Operation {
	return LockOperation(client, LockInput{Kind: LockAcquire, Lock: lockA, Session: s, Shared: sh}, LockOutput{Unknown: true}, call, 0)
}

func rel(client, s int, gen uint64, ok bool, call, ret int64) porcupine.Operation {
	return LockOperation(client, LockInput{Kind: LockRelease, Lock: lockA, Session: s, Gen: gen}, LockOutput{OK: ok}, call, ret)
}

func relUnknown(client, s int, gen uint64, call int64) porcupine.Operation {
	return LockOperation(client, LockInput{Kind: LockRelease, Lock: lockA, Session: s, Gen: gen}, LockOutput{Unknown: true}, call, 0)
}

func chk(client int, sh bool, gen uint64, valid bool, call, ret int64) porcupine.Operation {
	return LockOperation(client, LockInput{Kind: LockCheck, Lock: lockA, Shared: sh, Gen: gen}, LockOutput{OK: valid}, call, ret)
}

func lost(client, s int, lastAlive, learned int64) porcupine.Operation {
	return LostOperation(client, s, lockA, lastAlive, learned)
}

func onLock(lock string, op porcupine.Operation) porcupine.Operation {
	in := op.Input.(LockInput)
	in.Lock = lock
	op.Input = in
	return op
}

const excl, shrd = false, true

// checkLock runs porcupine on a lock history, bounded so that a search
// blow-up fails rather than hangs.
func checkLock(h []porcupine.Operation) (porcupine.CheckResult, porcupine.LinearizationInfo) {
	return porcupine.CheckOperationsVerbose(LockModel, h, 20*time.Second)
}

// TestLockModelAccepts: histories a correct cell may produce are
// linearizable, including unknown outcomes, expiries and shared holders.
func TestLockModelAccepts(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []porcupine.Operation
	}{
		{"empty", nil},
		{"sequential hand-over", []porcupine.Operation{
			acq(0, 1, excl, 5, 0, 10), chk(2, excl, 5, true, 11, 12), rel(0, 1, 5, true, 20, 30),
			chk(2, excl, 5, false, 31, 32), acq(1, 2, excl, 9, 40, 50), chk(2, excl, 9, true, 51, 52),
			chk(2, excl, 5, false, 53, 54), chk(2, shrd, 9, false, 55, 56)}},
		{"concurrent acquires: one wins", []porcupine.Operation{
			acq(0, 1, excl, 3, 0, 10), acqFail(1, 2, excl, 0, 10), chk(2, excl, 3, true, 20, 30)}},
		{"release and acquire overlap", []porcupine.Operation{
			acq(0, 1, excl, 3, 0, 10), rel(0, 1, 3, true, 20, 40), acq(1, 2, excl, 4, 30, 50),
			chk(2, excl, 3, true, 25, 26), chk(2, excl, 4, true, 45, 60)}},
		{"a repeated acquire answers the hold", []porcupine.Operation{
			acq(0, 1, excl, 3, 0, 10), acq(0, 1, excl, 3, 20, 30)}},
		{"failures change nothing", []porcupine.Operation{
			acqFail(0, 1, excl, 0, 10), acq(1, 2, excl, 3, 20, 30), rel(1, 2, 2, false, 40, 50),
			rel(0, 1, 3, false, 40, 50), chk(2, excl, 3, true, 60, 70)}},
		{"shared holders", []porcupine.Operation{
			acq(0, 1, shrd, 7, 0, 10), acq(1, 2, shrd, 7, 20, 30), acqFail(2, 3, excl, 35, 36),
			rel(0, 1, 7, true, 40, 50), chk(3, shrd, 7, true, 60, 70), chk(3, excl, 7, false, 60, 70),
			rel(1, 2, 7, true, 80, 90), chk(3, shrd, 7, false, 100, 110), acq(2, 3, excl, 8, 120, 130)}},
		{"concurrent shared joins", []porcupine.Operation{
			acq(0, 1, shrd, 7, 0, 10), acq(1, 2, shrd, 7, 0, 10), acq(2, 3, shrd, 7, 5, 15)}},
		{"expiry frees the lock", []porcupine.Operation{
			acq(0, 1, excl, 3, 0, 10), lost(0, 1, 10, 100), acq(1, 2, excl, 4, 50, 60),
			chk(2, excl, 3, false, 70, 80), chk(2, excl, 4, true, 70, 80)}},
		{"expiry since the acquire's send (its last sign of life)", []porcupine.Operation{
			acq(0, 1, excl, 3, 0, 10), lost(0, 1, 0, 20), acq(1, 2, excl, 4, 30, 40)}},
		{"expiry never learned", []porcupine.Operation{
			acq(0, 1, excl, 3, 0, 10), lost(0, 1, 10, -1), acq(1, 2, excl, 4, 50, 60)}},
		{"expiry never learned may not have happened", []porcupine.Operation{
			acq(0, 1, excl, 3, 0, 10), lost(0, 1, 10, -1), chk(2, excl, 3, true, 50, 60), rel(0, 1, 3, true, 70, 80)}},
		{"expiry of one shared holder", []porcupine.Operation{
			acq(0, 1, shrd, 3, 0, 10), acq(1, 2, shrd, 3, 0, 10), lost(0, 1, 10, 20),
			chk(2, shrd, 3, true, 30, 40), rel(1, 2, 3, true, 50, 60), acq(0, 4, excl, 6, 70, 80)}},
		{"expiry recorded once for every lock", []porcupine.Operation{
			acq(0, 1, excl, 3, 0, 10), onLock(lockB, acq(0, 1, excl, 4, 0, 10)), LostOperation(0, 1, "", 10, 20),
			acq(1, 2, excl, 5, 30, 40), onLock(lockB, acq(1, 2, excl, 6, 30, 40))}},
		{"locks are independent; generations are cell-wide", []porcupine.Operation{
			acq(0, 1, excl, 3, 0, 10), onLock(lockB, acq(1, 2, excl, 4, 0, 10)),
			onLock(lockB, chk(2, excl, 4, true, 20, 30)), chk(2, excl, 3, true, 20, 30)}},
		{"unknown acquire that never took effect", []porcupine.Operation{
			acqUnknown(0, 1, excl, 0), acq(1, 2, excl, 3, 10, 20), chk(2, excl, 3, true, 30, 40)}},
		{"unknown acquire that took effect late", []porcupine.Operation{
			acq(1, 2, excl, 3, 0, 5), acqUnknown(0, 1, excl, 1), rel(1, 2, 3, true, 10, 20),
			chk(2, excl, 9, true, 30, 40), acqFail(1, 2, excl, 50, 60)}},
		{"unknown acquire bound by a repeated acquire", []porcupine.Operation{
			acq(1, 2, excl, 3, 0, 5), rel(1, 2, 3, true, 6, 7), acqUnknown(0, 1, excl, 10),
			acq(0, 1, excl, 4, 20, 30), rel(0, 1, 4, true, 40, 50), acq(1, 2, excl, 5, 60, 70)}},
		{"unseen generation freed by expiry, then a greater one", []porcupine.Operation{
			acq(1, 2, excl, 3, 0, 5), rel(1, 2, 3, true, 6, 7), acqUnknown(0, 1, excl, 10),
			lost(0, 1, 10, 20), acq(1, 2, excl, 5, 30, 40)}},
		{"unknown release: took effect", []porcupine.Operation{
			acq(0, 1, excl, 3, 0, 10), relUnknown(0, 1, 3, 20), acq(1, 2, excl, 4, 30, 40)}},
		{"unknown release: did not", []porcupine.Operation{
			acq(0, 1, excl, 3, 0, 10), relUnknown(0, 1, 3, 20), chk(2, excl, 3, true, 30, 40), acqFail(1, 2, excl, 30, 40)}},
		{"unknown release of any generation (a cancelled wait)", []porcupine.Operation{
			acqUnknown(0, 1, excl, 0), relUnknown(0, 1, 0, 10), acq(1, 2, excl, 4, 30, 40)}},
		{"unknown check says nothing", []porcupine.Operation{
			acq(0, 1, excl, 3, 0, 10), LockOperation(2, LockInput{Kind: LockCheck, Lock: lockA, Gen: 1}, LockOutput{Unknown: true}, 20, 30)}},
		{"unknown acquire with a finite return: no effect", []porcupine.Operation{
			{ClientId: 0, Input: LockInput{Kind: LockAcquire, Lock: lockA, Session: 1}, Output: LockOutput{Unknown: true}, Call: 0, Return: 10},
			acq(1, 2, excl, 3, 20, 30)}},
	} {
		if res, info := checkLock(tc.ops); res != porcupine.Ok {
			t.Errorf("%s: %s, want Ok%s", tc.name, res, Window(LockModel, tc.ops, info))
		}
	}
}

// TestLockModelRejects: each violation of invariants 1 and 2 (and a grant
// to an expired session, etcd #9921) is Illegal.
func TestLockModelRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []porcupine.Operation
	}{
		{"two exclusive holders", []porcupine.Operation{
			acq(0, 1, excl, 3, 0, 10), acq(1, 2, excl, 4, 20, 30)}},
		{"two exclusive holders, then the first releases", []porcupine.Operation{
			acq(0, 1, excl, 3, 0, 10), acq(1, 2, excl, 4, 20, 30), rel(0, 1, 3, true, 40, 50)}},
		{"exclusive while shared", []porcupine.Operation{
			acq(0, 1, shrd, 3, 0, 10), acq(1, 2, excl, 4, 20, 30)}},
		{"shared while exclusive", []porcupine.Operation{
			acq(0, 1, excl, 3, 0, 10), acq(1, 2, shrd, 3, 20, 30)}},
		{"a shared join at another generation", []porcupine.Operation{
			acq(0, 1, shrd, 3, 0, 10), acq(1, 2, shrd, 4, 20, 30)}},
		{"a repeated acquire at another generation", []porcupine.Operation{
			acq(0, 1, excl, 3, 0, 10), acq(0, 1, excl, 4, 20, 30)}},
		{"the same generation twice", []porcupine.Operation{
			acq(0, 1, excl, 5, 0, 10), rel(0, 1, 5, true, 20, 30), acq(1, 2, excl, 5, 40, 50)}},
		{"a smaller generation", []porcupine.Operation{
			acq(0, 1, excl, 5, 0, 10), rel(0, 1, 5, true, 20, 30), acq(1, 2, excl, 4, 40, 50)}},
		{"a smaller generation on another lock is fine, on this one not", []porcupine.Operation{
			onLock(lockB, acq(0, 1, excl, 9, 0, 10)),
			acq(0, 1, excl, 5, 0, 10), rel(0, 1, 5, true, 20, 30), acq(1, 2, excl, 2, 40, 50)}},
		{"a valid check of a superseded generation", []porcupine.Operation{
			acq(0, 1, excl, 3, 0, 10), rel(0, 1, 3, true, 20, 30), acq(1, 2, excl, 4, 40, 50), chk(2, excl, 3, true, 60, 70)}},
		{"a valid check of a released lock", []porcupine.Operation{
			acq(0, 1, excl, 3, 0, 10), rel(0, 1, 3, true, 20, 30), chk(2, excl, 3, true, 40, 50)}},
		{"a valid check in the wrong mode", []porcupine.Operation{
			acq(0, 1, excl, 3, 0, 10), chk(2, shrd, 3, true, 20, 30)}},
		{"an invalid check while the holder provably holds", []porcupine.Operation{
			acq(0, 1, excl, 3, 0, 10), chk(2, excl, 3, false, 20, 30), rel(0, 1, 3, true, 40, 50)}},
		{"an invalid check while a shared holder provably holds", []porcupine.Operation{
			acq(0, 1, shrd, 3, 0, 10), acq(1, 2, shrd, 3, 0, 10), rel(0, 1, 3, true, 20, 30),
			chk(2, shrd, 3, false, 40, 50), rel(1, 2, 3, true, 60, 70)}},
		{"a release at a wrong generation", []porcupine.Operation{
			acq(0, 1, excl, 3, 0, 10), rel(0, 1, 2, true, 20, 30)}},
		{"a release by a non-holder", []porcupine.Operation{
			acq(0, 1, excl, 3, 0, 10), rel(1, 2, 3, true, 20, 30)}},
		{"an acquire granted to an expired session", []porcupine.Operation{
			lost(0, 1, 0, 10), acq(0, 1, excl, 3, 20, 30)}},
		{"a release after the session's expiry", []porcupine.Operation{
			acq(0, 1, excl, 3, 0, 10), lost(0, 1, 12, 20), rel(0, 1, 3, true, 30, 40)}},
		{"the holder still valid after its expiry was learned", []porcupine.Operation{
			acq(0, 1, excl, 3, 0, 10), lost(0, 1, 12, 20), chk(2, excl, 3, true, 30, 40)}},
		{"an expiry placed before the acquire it ended", []porcupine.Operation{
			acq(0, 1, excl, 3, 0, 10), lost(0, 1, 0, 20), chk(2, excl, 3, true, 30, 40)}},
		{"after an unseen generation, an observed one not greater", []porcupine.Operation{
			acq(1, 2, excl, 5, 0, 10), rel(1, 2, 5, true, 20, 30), acqUnknown(0, 1, excl, 40),
			acq(0, 1, excl, 5, 60, 70)}},
		{"an unseen generation then released: the next must be greater than it", []porcupine.Operation{
			acq(1, 2, excl, 5, 0, 10), rel(1, 2, 5, true, 20, 30), acqUnknown(0, 1, excl, 40),
			chk(2, excl, 6, true, 50, 55), rel(0, 1, 6, true, 60, 70), acq(1, 2, excl, 6, 80, 90)}},
		{"an unseen generation shown twice, differently", []porcupine.Operation{
			acqUnknown(0, 1, excl, 0), chk(2, excl, 8, true, 10, 20), chk(2, excl, 9, true, 30, 40)}},
		{"an unseen hold, once shown, still holds", []porcupine.Operation{
			acqUnknown(0, 1, excl, 0), chk(2, excl, 8, true, 10, 20), acq(1, 2, excl, 9, 30, 40)}},
		{"an unknown release cannot both free and keep", []porcupine.Operation{
			acq(0, 1, excl, 3, 0, 10), relUnknown(0, 1, 3, 20), acq(1, 2, excl, 4, 30, 40), chk(2, excl, 3, true, 50, 60)}},
		{"a pending acquire of an expired session cannot take effect", []porcupine.Operation{
			acqUnknown(0, 1, excl, 0), lost(0, 1, 5, 10), chk(2, excl, 9, true, 20, 30)}},
		{"an unknown release names its generation", []porcupine.Operation{
			acq(0, 1, excl, 3, 0, 10), relUnknown(0, 1, 3, 20), acq(0, 1, excl, 5, 40, 50),
			chk(2, excl, 5, true, 60, 70), acq(1, 2, excl, 6, 80, 90)}},
		{"an unknown acquire cannot take a held lock", []porcupine.Operation{
			acq(1, 2, excl, 3, 0, 5), acqUnknown(0, 1, excl, 10), chk(2, excl, 9, true, 20, 30)}},
	} {
		if res, info := checkLock(tc.ops); res != porcupine.Illegal {
			t.Errorf("%s: %s, want Illegal%s", tc.name, res, Window(LockModel, tc.ops, info))
		}
	}
}

// TestLockPartition: one partition per lock, in path order; an expiry
// recorded for every lock reaches the locks its session used; unknown
// checks are dropped; the other unknown operations end at their call; an
// expiry is followed where an acquire of its session may come after it.
func TestLockPartition(t *testing.T) {
	h := []porcupine.Operation{
		onLock(lockB, acq(0, 1, excl, 4, 0, 10)),
		acqUnknown(0, 1, excl, 20),
		onLock(lockB, acqUnknown(1, 2, excl, 5)),
		LockOperation(2, LockInput{Kind: LockCheck, Lock: lockA, Gen: 1}, LockOutput{Unknown: true}, 20, 30),
		LostOperation(0, 1, "", 10, 50),
		LostOperation(1, 2, "", 10, -1),
	}
	followed := func(part []porcupine.Operation) (out []string) {
		for _, op := range part {
			if in := op.Input.(LockInput); in.Kind == LockLost {
				out = append(out, fmt.Sprintf("s%d:%t", in.Session, in.followed))
			}
		}
		return out
	}
	for _, tc := range []struct {
		name string
		h    []porcupine.Operation
		want []string
	}{
		{"an unknown acquire called after lastAlive", h[1:2], []string{"s1:true"}},
		{"an acquire returning at lastAlive", []porcupine.Operation{acq(0, 1, excl, 4, 0, 10)}, []string{"s1:true"}},
		{"an acquire returning before lastAlive", []porcupine.Operation{acq(0, 1, excl, 4, 0, 9)}, []string{"s1:false"}},
		{"a definite failure after lastAlive", []porcupine.Operation{acqFail(0, 1, excl, 20, 30)}, []string{"s1:false"}},
		{"an acquire of another session", []porcupine.Operation{acq(0, 2, excl, 4, 20, 30)}, []string{"s1:false"}},
	} {
		parts := LockModel.Partition(append(slices.Clone(tc.h), lost(0, 1, 10, 50)))
		if got := followed(parts[0]); !slices.Equal(got, tc.want) {
			t.Errorf("%s: expiries followed %v, want %v", tc.name, got, tc.want)
		}
	}
	parts := LockModel.Partition(h)
	if len(parts) != 2 {
		t.Fatalf("%d partitions, want 2: %v", len(parts), parts)
	}
	for i, want := range []string{
		"acquire(jobs/a/lock, s1, exclusive) → unknown (pending) [20, 20]; lost(*, s1): session expired [10, 50]",
		"acquire(jobs/b/lock, s1, exclusive) → gen 4 [0, 10]; acquire(jobs/b/lock, s2, exclusive) → unknown (pending) [5, 5]; " +
			"lost(*, s1): session expired [10, 50]; lost(*, s2): session expired, maybe (never confirmed) [10, 10]",
	} {
		var got []string
		for _, op := range parts[i] {
			got = append(got, fmt.Sprintf("%s [%d, %d]", LockModel.DescribeOperation(op.Input, op.Output), op.Call, op.Return))
		}
		if g := strings.Join(got, "; "); g != want {
			t.Errorf("partition %d:\n got %s\nwant %s", i, g, want)
		}
	}
}

// captureTB is a testing.TB whose failures and logs Check reports to it
// rather than to the test.
type captureTB struct {
	testing.TB
	logs  []string
	fatal []string
}

func (c *captureTB) Helper()         {}
func (c *captureTB) Log(args ...any) { c.logs = append(c.logs, fmt.Sprint(args...)) }
func (c *captureTB) Logf(format string, args ...any) {
	c.logs = append(c.logs, fmt.Sprintf(format, args...))
}
func (c *captureTB) Fatalf(format string, args ...any) {
	c.fatal = append(c.fatal, fmt.Sprintf(format, args...))
}

// TestLockCheckReportsViolation: on two exclusive holders Check fails,
// writes a visualization that shows the operations, and logs a window that
// marks the second grant.
func TestLockCheckReportsViolation(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	h := []porcupine.Operation{
		acq(0, 1, excl, 3, 0, 10e6),
		chk(2, excl, 3, true, 12e6, 13e6),
		acq(1, 2, excl, 4, 20e6, 30e6),
		rel(0, 1, 3, true, 40e6, 50e6),
	}
	c := &captureTB{TB: t}
	Check(c, LockModel, h, porcupine.Annotation{Tag: "nemesis", Start: 15e6, End: 25e6, Description: "partition"})
	if len(c.fatal) != 1 || !strings.Contains(c.fatal[0], "not linearizable") {
		t.Fatalf("Check failed with %q, want one failure for a history that is not linearizable", c.fatal)
	}
	all := strings.Join(c.logs, "\n")
	var path string
	for _, l := range c.logs {
		if p, ok := strings.CutPrefix(l, "porcupine visualization: "); ok {
			path = p
		}
	}
	if path == "" {
		t.Fatalf("no visualization logged:\n%s", all)
	}
	html, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<html", "acquire(jobs/a/lock, s2, exclusive)", "exclusive by s1 at gen 3", "partition"} {
		if !strings.Contains(string(html), want) {
			t.Errorf("visualization %s (%d bytes) lacks %q", path, len(html), want)
		}
	}
	if want := "> client 1 [20.000ms, 30.000ms] acquire(jobs/a/lock, s2, exclusive) → gen 4"; !strings.Contains(all, want) {
		t.Errorf("the window does not mark the second grant (%q):\n%s", want, all)
	}
}

// TestLockRecorder: the recorder's lock operations land in the history as
// LockModel expects them: unknown outcomes open-ended, an expiry never
// learned open-ended, Meta as metadata; a correct run passes Check.
func TestLockRecorder(t *testing.T) {
	rec := NewRecorder()
	op := rec.BeginLock(0, LockInput{Kind: LockAcquire, Lock: lockA, Session: 1})
	op.End(LockOutput{OK: true, Gen: 3})
	op = rec.BeginLock(1, LockInput{Kind: LockAcquire, Lock: lockA, Session: 2})
	op.Meta = "lock held"
	op.End(LockOutput{})
	rec.BeginLock(2, LockInput{Kind: LockCheck, Lock: lockA, Gen: 3}).End(LockOutput{OK: true})
	rec.BeginLock(0, LockInput{Kind: LockRelease, Lock: lockA, Session: 1, Gen: 3}).EndUnknown()
	rec.BeginLock(1, LockInput{Kind: LockAcquire, Lock: lockA, Session: 2}).End(LockOutput{Unknown: true, OK: true, Gen: 7})
	rec.AddLost(0, 1, "", rec.Now(), -1)
	rec.AddLost(1, 2, lockA, rec.Now(), rec.Now())

	h := rec.History()
	if len(h) != 7 {
		t.Fatalf("%d operations recorded, want 7", len(h))
	}
	for i, o := range h {
		if o.Return < o.Call {
			t.Errorf("op %d returns at %d before its call at %d", i, o.Return, o.Call)
		}
	}
	if h[1].Metadata != "lock held" || h[0].Metadata != nil {
		t.Errorf("metadata %v, %v; want nil, \"lock held\"", h[0].Metadata, h[1].Metadata)
	}
	for _, i := range []int{3, 4, 5} {
		if h[i].Return != math.MaxInt64 {
			t.Errorf("op %d (%s) returns at %d, want open-ended", i, LockModel.DescribeOperation(h[i].Input, h[i].Output), h[i].Return)
		}
	}
	if out := h[4].Output.(LockOutput); out != (LockOutput{Unknown: true}) {
		t.Errorf("unknown acquire recorded as %+v", out)
	}
	if h[6].Return == math.MaxInt64 {
		t.Errorf("a learned expiry is open-ended")
	}
	Check(t, LockModel, h)
}

// TestLockModelSimulated: whatever a reference lock does, observed through
// random overlapping call and return times, unknown outcomes and expiries,
// the history is linearizable.
func TestLockModelSimulated(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		s := newLockSim(rapidDraw{rt}, drawProfile(rt))
		n := rapid.IntRange(1, 60).Draw(rt, "ops")
		for range n {
			s.step()
		}
		res, info := checkLock(s.ops)
		if res == porcupine.Unknown {
			// The search timed out (a history with many pending
			// operations, on a machine busy with the rest of the suite):
			// no verdict either way, as in TestLockModelPruningKeepsVerdicts.
			rt.Skipf("porcupine found no verdict on this history of %d operations within its timeout", len(s.ops))
		}
		if res != porcupine.Ok {
			rt.Fatalf("a reference history is %s:\n%s%s", res, strings.Join(s.log, "\n"), Window(LockModel, s.ops, info))
		}
	})
}

// TestLockModelPruningKeepsVerdicts: dropping dominated states, pending
// operations that can no longer matter and expired sessions that nothing
// follows changes no verdict, on simulated histories and on corrupted ones
// (a generation off by one, an outcome flipped).
func TestLockModelPruningKeepsVerdicts(t *testing.T) {
	exact := lockModel(false)
	rapid.Check(t, func(rt *rapid.T) {
		s := newLockSim(rapidDraw{rt}, drawProfile(rt))
		for range rapid.IntRange(1, 20).Draw(rt, "ops") {
			s.step()
		}
		h := slices.Clone(s.ops)
		if len(h) > 0 && rapid.Bool().Draw(rt, "corrupt") {
			i := rapid.IntRange(0, len(h)-1).Draw(rt, "corrupted op")
			out := h[i].Output.(LockOutput)
			switch in := h[i].Input.(LockInput); {
			case in.Kind == LockAcquire && out.OK:
				out.Gen = uint64(max(0, int64(out.Gen)+rapid.SampledFrom([]int64{-2, -1, 1}).Draw(rt, "gen off by")))
			case in.Kind == LockAcquire && !out.Unknown:
				out = LockOutput{OK: true, Gen: uint64(rapid.IntRange(1, int(s.counter)+2).Draw(rt, "gen"))}
			case !out.Unknown:
				out.OK = !out.OK
			}
			h[i].Output = out
		}
		want := porcupine.CheckOperationsTimeout(exact, h, 5*time.Second)
		if want == porcupine.Unknown {
			rt.Skip("the exact model is too slow on this history")
		}
		if got := porcupine.CheckOperationsTimeout(LockModel, h, 20*time.Second); got != want {
			rt.Fatalf("pruned model: %s, exact model: %s, on\n%s", got, want, strings.Join(s.log, "\n"))
		}
	})
}

// TestLockModelLongHistory: a long simulated run (a few workers on two
// locks, as the nemesis runs them) checks quickly.
func TestLockModelLongHistory(t *testing.T) {
	for seed := range uint64(3) {
		s := newLockSim(randDraw{rand.New(rand.NewPCG(seed, 1))}, nemesisProfile)
		for range 3000 {
			s.step()
		}
		start := time.Now()
		res, info := checkLock(s.ops)
		t.Logf("seed %d: %d operations (%d unknown) checked in %v", seed, len(s.ops), s.unknown, time.Since(start).Round(time.Millisecond))
		if res != porcupine.Ok {
			t.Fatalf("seed %d: %s%s", seed, res, Window(LockModel, s.ops, info))
		}
	}
}

// TestLockModelFindsViolationInLongHistory: a valid check of a long
// superseded generation in the middle of a long simulated run, among
// hundreds of unknown outcomes, is reported Illegal, and quickly.
func TestLockModelFindsViolationInLongHistory(t *testing.T) {
	s := newLockSim(randDraw{rand.New(rand.NewPCG(7, 1))}, nemesisProfile)
	for range 3000 {
		s.step()
	}
	mid := s.now / 2
	h := append(s.ops, chk(9, excl, 1, true, mid, mid+10))
	start := time.Now()
	res, info := checkLock(h)
	t.Logf("%d operations (%d unknown) checked in %v: %s", len(h), s.unknown, time.Since(start).Round(time.Millisecond), res)
	if res != porcupine.Illegal {
		t.Fatalf("%s, want Illegal", res)
	}
	if w, want := Window(LockModel, h, info), "> client 9"; !strings.Contains(w, want) {
		t.Errorf("the window does not mark the check (%q):\n%s", want, w)
	}
}

// drawer is where the simulation draws its choices from.
type drawer interface {
	// n draws a number in [0, max).
	n(label string, max int) int
}

type rapidDraw struct{ t *rapid.T }

func (d rapidDraw) n(label string, max int) int { return rapid.IntRange(0, max-1).Draw(d.t, label) }

type randDraw struct{ r *rand.Rand }

func (d randDraw) n(_ string, max int) int { return d.r.IntN(max) }

// simProfile sets how often each thing happens in a simulated run, in
// percent.
type simProfile struct {
	clients int
	spread  int64 // how far calls and returns stray from the linearization point
	shared  int   // acquires in shared mode, and checks of shared sequencers
	unknown int   // acquires and releases whose outcome is unknown (checks: as often)
	failed  int   // acquires and releases that fail for no visible reason (lock-delay)
	lost    int   // steps where a session expires
	unsure  int   // expiries never confirmed to the client
	zombie  int   // steps where an expired session calls Acquire
}

// nemesisProfile is the mix of the lock nemesis: a few workers taking
// exclusive locks, some timeouts, sessions expiring now and then.
var nemesisProfile = simProfile{clients: 5, spread: 150, shared: 10, unknown: 3, failed: 5, lost: 2, unsure: 20, zombie: 1}

// drawProfile draws a mix, harsher than the nemesis's but short of the
// worst (most calls unknown, all shared, no expiry confirmed), where the
// sets of states the lock may be in grow exponentially: each pending
// shared Acquire of a session that may have expired may have joined or
// not, and may still hold.
func drawProfile(t *rapid.T) simProfile {
	pct := func(label string, of ...int) int { return rapid.SampledFrom(of).Draw(t, label) }
	return simProfile{
		clients: rapid.IntRange(1, 4).Draw(t, "clients"),
		spread:  rapid.SampledFrom([]int64{0, 50, 150, 300}).Draw(t, "spread"),
		shared:  pct("shared %", 0, 10, 50, 100),
		unknown: pct("unknown %", 0, 5, 20),
		failed:  pct("failed %", 0, 10),
		lost:    pct("lost %", 0, 5, 15),
		unsure:  pct("unsure %", 0, 20, 50),
		zombie:  pct("zombie %", 0, 5),
	}
}

// lockSim is a reference lock cell (fs's rules, cell-wide generations):
// each step linearizes one operation at time 100·i and records it with a
// call and return time around that point.
type lockSim struct {
	d        drawer
	p        simProfile
	locks    map[string]*simLock
	counter  uint64   // the cell's generation counter
	issued   []uint64 // every generation issued, seen or not
	sessions []int    // each client's session
	dead     []int
	next     int // the next session number
	now      int64
	ops      []porcupine.Operation
	unknown  int
	log      []string
}

type simLock struct {
	mode    lockMode
	holders map[int]bool
	gen     uint64
}

var simLocks = []string{lockA, lockB}

func newLockSim(d drawer, p simProfile) *lockSim {
	s := &lockSim{d: d, p: p, locks: map[string]*simLock{}, next: 1}
	for _, l := range simLocks {
		s.locks[l] = &simLock{holders: map[int]bool{}}
	}
	for range p.clients {
		s.sessions = append(s.sessions, s.next)
		s.next++
	}
	return s
}

// pct draws whether something that happens percent % of the time does.
func (s *lockSim) pct(label string, percent int) bool {
	return percent > 0 && s.d.n(label, 100) < percent
}

func (s *lockSim) around() (call, ret int64) {
	call, ret = s.now, s.now
	if s.p.spread > 0 {
		call -= int64(s.d.n("before", int(s.p.spread)))
		ret += int64(s.d.n("after", int(s.p.spread)))
	}
	return call, ret
}

func (s *lockSim) isDead(session int) bool {
	return slices.Contains(s.dead, session)
}

// canAcquire: whether session may take l in mode m now, and the
// generation it would get (0: a new one).
func (s *lockSim) canAcquire(l *simLock, session int, m lockMode) (bool, uint64) {
	switch {
	case s.isDead(session):
		return false, 0
	case l.holders[session]:
		return l.mode == m, l.gen
	case l.mode == free:
		return true, 0
	case l.mode == shared && m == shared:
		return true, l.gen
	}
	return false, 0
}

func (s *lockSim) grant(l *simLock, session int, m lockMode, gen uint64) uint64 {
	if gen == 0 {
		s.counter += 1 + uint64(s.d.n("gen step", 3))
		gen = s.counter
		s.issued = append(s.issued, gen)
		l.mode, l.gen = m, gen
	}
	l.holders[session] = true
	return gen
}

func (s *lockSim) drop(l *simLock, session int) {
	delete(l.holders, session)
	if len(l.holders) == 0 {
		l.mode, l.gen = free, 0
	}
}

// someGen is a generation to name: the lock's current one or any issued.
func (s *lockSim) someGen(l *simLock) uint64 {
	if (l.mode != free && s.d.n("current gen", 2) == 0) || len(s.issued) == 0 {
		return l.gen
	}
	return s.issued[s.d.n("issued gen", len(s.issued))]
}

type outcome int

const (
	asItShould outcome = iota
	failedAnyway
	unknownOutcome
)

// outcome draws how an acquire or release ends.
func (s *lockSim) outcome() outcome {
	switch {
	case s.pct("unknown", s.p.unknown):
		return unknownOutcome
	case s.pct("failed", s.p.failed):
		return failedAnyway
	}
	return asItShould
}

func (s *lockSim) record(client int, in LockInput, out LockOutput) {
	call, ret := s.around()
	op := LockOperation(client, in, out, call, ret)
	if out.Unknown {
		s.unknown++
		if s.d.n("finite unknown", 4) == 0 {
			op.Return = ret // as a hand-built history may have it
		}
	}
	s.ops = append(s.ops, op)
	s.log = append(s.log, fmt.Sprintf("  at %d: client %d [%d, %d] %s", s.now, client, op.Call, op.Return, describeLockOp(in, out)))
}

func (s *lockSim) step() {
	s.now += 100
	c := s.d.n("client", len(s.sessions))
	session := s.sessions[c]
	lock := simLocks[s.d.n("lock", len(simLocks))]
	l := s.locks[lock]
	switch {
	case s.pct("lost", s.p.lost): // the session expires; the client starts a new one
		for _, l := range s.locks {
			if l.holders[session] {
				s.drop(l, session)
			}
		}
		s.dead = append(s.dead, session)
		s.sessions[c] = s.next
		s.next++
		lastAlive, learned := s.around()
		if s.pct("unsure", s.p.unsure) {
			learned = -1
		}
		if s.d.n("lost per lock", 2) == 0 {
			s.ops = append(s.ops, LostOperation(c, session, "", lastAlive, learned))
		} else {
			for _, lock := range simLocks {
				s.ops = append(s.ops, LostOperation(c, session, lock, lastAlive, learned))
			}
		}
		s.log = append(s.log, fmt.Sprintf("  at %d: client %d [%d, %d] s%d expired", s.now, c, lastAlive, learned, session))
	case s.pct("zombie", s.p.zombie): // a call on an expired session
		if len(s.dead) == 0 {
			return
		}
		in := LockInput{Kind: LockAcquire, Lock: lock, Session: s.dead[s.d.n("dead", len(s.dead))]}
		s.record(c, in, LockOutput{Unknown: s.d.n("zombie unknown", 2) == 0})
	default:
		switch k := s.d.n("kind", 10); {
		case k < 4:
			s.acquire(c, session, lock, l)
		case k < 7:
			s.release(c, session, lock, l)
		default:
			gen := s.someGen(l)
			sh := s.pct("shared", s.p.shared)
			valid := l.mode != free && l.mode == modeOf(sh) && l.gen == gen
			in := LockInput{Kind: LockCheck, Lock: lock, Session: session, Shared: sh, Gen: gen}
			s.record(c, in, LockOutput{OK: valid, Unknown: s.pct("unknown", s.p.unknown)})
		}
	}
}

func (s *lockSim) acquire(c, session int, lock string, l *simLock) {
	m := modeOf(s.pct("shared", s.p.shared))
	in := LockInput{Kind: LockAcquire, Lock: lock, Session: session, Shared: m == shared}
	ok, gen := s.canAcquire(l, session, m)
	switch s.outcome() {
	case asItShould:
		if ok {
			s.record(c, in, LockOutput{OK: true, Gen: s.grant(l, session, m, gen)})
		} else {
			s.record(c, in, LockOutput{})
		}
	case failedAnyway:
		s.record(c, in, LockOutput{})
	case unknownOutcome:
		if ok && s.d.n("took effect", 2) == 0 {
			s.grant(l, session, m, gen)
		}
		s.record(c, in, LockOutput{Unknown: true})
	}
}

func (s *lockSim) release(c, session int, lock string, l *simLock) {
	gen := s.someGen(l)
	if s.d.n("any gen", 8) == 0 {
		gen = 0
	}
	in := LockInput{Kind: LockRelease, Lock: lock, Session: session, Gen: gen}
	ok := l.holders[session] && (gen == 0 || gen == l.gen)
	switch s.outcome() {
	case asItShould:
		if ok {
			s.drop(l, session)
		}
		s.record(c, in, LockOutput{OK: ok})
	case failedAnyway:
		s.record(c, in, LockOutput{})
	case unknownOutcome:
		if ok && s.d.n("took effect", 2) == 0 {
			s.drop(l, session)
		}
		s.record(c, in, LockOutput{Unknown: true})
	}
}
