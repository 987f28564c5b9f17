package election_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/client/election"
	"github.com/chubby-dev/chubby/testing/cell"
)

// TestMain stops the cell the examples share.
func TestMain(m *testing.M) {
	code := m.Run()
	cell.StopExamples()
	os.Exit(code)
}

// dial returns a session with the examples' cell.
func dial(ctx context.Context) *client.Client {
	c, err := client.Dial(ctx, client.Config{Servers: cell.ExampleServers()})
	if err != nil {
		panic(err)
	}
	return c
}

// A leader campaigns, leads while its term lasts, fencing its writes with
// the term's sequencer, and resigns; the next campaigner then leads.
func Example() {
	ctx := context.Background()
	a, b := dial(ctx), dial(ctx)
	defer a.Close()
	defer b.Close()
	ea := election.New(a, "/ls/local/example")
	eb := election.New(b, "/ls/local/example")

	term, err := ea.Campaign(ctx, []byte("host-a"))
	if err != nil {
		panic(err)
	}
	// Lead: a write fenced by the term's sequencer commits only while it leads.
	if _, err := a.WriteFile(ctx, "/ls/local/example-state", []byte("written by A"), client.WithSequencer(term.Sequencer())); err != nil {
		panic(err)
	}
	next := make(chan *election.Term)
	go func() {
		t, err := eb.Campaign(ctx, []byte("host-b")) // waits in line
		if err != nil {
			panic(err)
		}
		next <- t
	}()
	l, _ := eb.Leader(ctx)
	fmt.Printf("leader: %s\n", l.Value)
	if err := ea.Resign(ctx); err != nil {
		panic(err)
	}
	termB := <-next
	fmt.Printf("B leads with a newer sequencer: %v\n", termB.Sequencer().Gen > term.Sequencer().Gen)
	_, err = a.WriteFile(ctx, "/ls/local/example-state", []byte("stale"), client.WithSequencer(term.Sequencer()))
	fmt.Printf("A's write with its old term's sequencer refused: %v\n", errors.Is(err, client.ErrBadSequencer))
	// Output:
	// leader: host-a
	// B leads with a newer sequencer: true
	// A's write with its old term's sequencer refused: true
}

func ExampleNew() {
	ctx := context.Background()
	c := dial(ctx)
	defer c.Close()
	// The directory is created by the first Campaign or Observe; its parent
	// must exist. LockDelay: if a leader's session expires, nobody leads for
	// a second (its last writes in flight land first).
	e := election.New(c, "/ls/local/example-new", election.LockDelay(time.Second))
	fmt.Println(e.Dir())
	// Output: /ls/local/example-new
}

func ExampleElection_Campaign() {
	ctx := context.Background()
	c := dial(ctx)
	defer c.Close()
	e := election.New(c, "/ls/local/example-campaign")
	term, err := e.Campaign(ctx, []byte("host-a:8080"))
	if err != nil {
		panic(err)
	}
	defer e.Resign(ctx)
	fmt.Printf("leading, sequencer %s\n", term.Sequencer().Path)
	select {
	case <-term.Done():
		// Leadership may be lost: stop acting as leader by term.Err()'s StopBy.
		fmt.Println("lost:", term.Err())
	default:
		fmt.Println("still leading")
	}
	// Output:
	// leading, sequencer /ls/local/example-campaign
	// still leading
}

func ExampleElection_Proclaim() {
	ctx := context.Background()
	c := dial(ctx)
	defer c.Close()
	e := election.New(c, "/ls/local/example-proclaim")
	if _, err := e.Campaign(ctx, []byte("v1")); err != nil {
		panic(err)
	}
	defer e.Resign(ctx)
	if err := e.Proclaim(ctx, []byte("v2")); err != nil { // only while leading
		panic(err)
	}
	l, _ := e.Leader(ctx)
	fmt.Printf("%s\n", l.Value)
	// Output: v2
}

func ExampleElection_Resign() {
	ctx := context.Background()
	c := dial(ctx)
	defer c.Close()
	e := election.New(c, "/ls/local/example-resign")
	if _, err := e.Campaign(ctx, []byte("host-a")); err != nil {
		panic(err)
	}
	if err := e.Resign(ctx); err != nil {
		panic(err)
	}
	_, err := e.Leader(ctx)
	fmt.Println(err)
	// Output: /ls/local/example-resign: no leader
}

func ExampleElection_Leader() {
	ctx := context.Background()
	leader, reader := dial(ctx), dial(ctx)
	defer leader.Close()
	defer reader.Close()
	if _, err := election.New(leader, "/ls/local/example-leader").Campaign(ctx, []byte("host-a:8080")); err != nil {
		panic(err)
	}
	// Read from the reader's cache after the first time: no round trip.
	l, err := election.New(reader, "/ls/local/example-leader").Leader(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s %s\n", l.Value, l.Sequencer.Path)
	// Output: host-a:8080 /ls/local/example-leader
}

func ExampleElection_Observe() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	leader, watcher := dial(ctx), dial(ctx)
	defer leader.Close()
	defer watcher.Close()
	changes := election.New(watcher, "/ls/local/example-observe").Observe(ctx)
	show := func(l election.Leader) {
		if l.Sequencer.Gen == 0 {
			fmt.Println("(no leader)")
			return
		}
		fmt.Printf("%s\n", l.Value)
	}
	show(<-changes) // the leader now
	e := election.New(leader, "/ls/local/example-observe")
	if _, err := e.Campaign(ctx, []byte("host-a")); err != nil {
		panic(err)
	}
	show(<-changes)
	if err := e.Proclaim(ctx, []byte("host-a, v2")); err != nil {
		panic(err)
	}
	show(<-changes)
	// Output:
	// (no leader)
	// host-a
	// host-a, v2
}
