package assign_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/client/assign"
	"github.com/chubby-dev/chubby/testing/cell"
)

// dial is a session with the examples' cell (in a program: its servers).
func dial(ctx context.Context) *client.Client {
	c, err := client.Dial(ctx, client.Config{Servers: cell.ExampleServers(), LockDelay: client.NoLockDelay})
	if err != nil {
		log.Fatal(err)
	}
	return c
}

// Join a group of partitions and work on the ones this process owns, each
// with its item's sequencer, until the item may be lost.
func ExampleJoin() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := dial(ctx)
	defer c.Close()
	m, err := assign.Join(ctx, c, "/ls/local/example-join", 3,
		assign.OnRevoked(func(ctx context.Context, items []assign.Item) {
			// Finish the step under way on items before ctx ends.
		}),
		assign.OnLost(func(items []assign.Item) {
			log.Printf("lost %v: stop at once", items)
		}))
	if err != nil {
		log.Fatal(err)
	}
	defer m.Leave(context.Background())
	for a := range m.Assignments() {
		if len(a.Items) < 3 { // alone in the group, it gets every item
			continue
		}
		for _, it := range a.Items {
			// Work on it.N while it.Ctx lasts, sending it.Seq with each write.
			fmt.Printf("partition %d owned, lock %s\n", it.N, it.Seq.Path)
		}
		return
	}
	// Output:
	// partition 0 owned, lock /ls/local/example-join/items/0
	// partition 1 owned, lock /ls/local/example-join/items/1
	// partition 2 owned, lock /ls/local/example-join/items/2
}

// Leave hands the member's items to the others at once: OnRevoked, release,
// and the member's file deleted.
func ExampleMember_Leave() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ca, cb := dial(ctx), dial(ctx)
	defer ca.Close()
	defer cb.Close()
	a, err := assign.Join(ctx, ca, "/ls/local/example-leave", 4, assign.Name("a"))
	if err != nil {
		log.Fatal(err)
	}
	b, err := assign.Join(ctx, cb, "/ls/local/example-leave", 4, assign.Name("b"))
	if err != nil {
		log.Fatal(err)
	}
	defer b.Leave(context.Background())
	for as := range b.Assignments() { // b gets its share: two items
		if len(as.Items) == 2 {
			break
		}
	}
	if err := a.Leave(ctx); err != nil {
		log.Fatal(err)
	}
	for as := range b.Assignments() {
		if len(as.Items) == 4 {
			fmt.Println("b owns", as.Numbers())
			break
		}
	}
	fmt.Println("a:", a.Err())
	// Output:
	// b owns [0 1 2 3]
	// a: member left the group
}

// Balance is the pure algorithm the coordinator runs: here a fourth member
// joins three that share ten items, and takes only ⌊10/4⌋ = 2 of them.
func ExampleBalance() {
	before := assign.Balance(10, []string{"a", "b", "c"}, nil)
	after := assign.Balance(10, []string{"a", "b", "c", "d"}, before)
	fmt.Println(before)
	fmt.Println(after)
	fmt.Println("moved:", assign.Moves(before, after))
	// Output:
	// [a a a a b b b c c c]
	// [a a a d b b b c c d]
	// moved: 2
}

// ReadTable shows who owns what, e.g. for a status page.
func ExampleReadTable() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := dial(ctx)
	defer c.Close()
	m, err := assign.Join(ctx, c, "/ls/local/example-table", 2, assign.Name("worker-1"))
	if err != nil {
		log.Fatal(err)
	}
	defer m.Leave(context.Background())
	for a := range m.Assignments() { // the coordinator has written the table
		if len(a.Items) == 2 {
			break
		}
	}
	reader := dial(ctx) // any session can read the table
	defer reader.Close()
	t, err := assign.ReadTable(ctx, reader, "/ls/local/example-table")
	if err != nil {
		log.Fatal(err)
	}
	for i, owner := range t.Owners() {
		fmt.Printf("partition %d: %s\n", i, owner)
	}
	// Output:
	// partition 0: worker-1
	// partition 1: worker-1
}
