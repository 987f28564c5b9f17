package assign_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/client/assign"
)

// Join a group of 12 partitions and work on the ones this process owns,
// each with its item's sequencer, until the lock may be lost.
func ExampleJoin() {
	ctx := context.Background()
	c, err := client.Dial(ctx, client.Config{Servers: []string{"127.0.0.1:7100"}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	m, err := assign.Join(ctx, c, "/ls/local/partitions", 12,
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
		for _, it := range a.Items {
			fmt.Printf("partition %d owned with sequencer %s\n", it.N, it.Seq)
		}
	}
}

// Leave hands the member's items to the others: OnRevoked, release, and
// the member's file deleted.
func ExampleMember_Leave() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.Config{Servers: []string{"127.0.0.1:7100"}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	m, err := assign.Join(ctx, c, "/ls/local/partitions", 12)
	if err != nil {
		log.Fatal(err)
	}
	if err := m.Leave(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println(m.Err())
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
	ctx := context.Background()
	c, err := client.Dial(ctx, client.Config{Servers: []string{"127.0.0.1:7100"}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	t, err := assign.ReadTable(ctx, c, "/ls/local/partitions")
	if err != nil {
		log.Fatal(err)
	}
	for i, owner := range t.Owners() {
		fmt.Printf("partition %d: %s\n", i, owner)
	}
}
