package client_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/wire"
)

// TestListingInPages (issue 17, finding 2): a directory whose names do not
// fit one reply is listed completely, in order, over several ReadDir
// pages; the listing is cached whole, and a child added afterwards shows
// in the next listing. Before paging, the reply exceeded a frame, the
// server dropped it, and ReadDir never returned.
func TestListingInPages(t *testing.T) {
	r := newCacheRig(t)
	d := r.c.Path("big")
	if _, err := r.b.Open(ctxT(t), d, client.CreateDir()); err != nil {
		t.Fatal(err)
	}
	const n = 4400 // 4400 names of 250 bytes: 1.1 MB, over a frame (wire.MaxFrame)
	pad := strings.Repeat("n", 240)
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("%s%06d", pad, i))
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				if _, err := r.b.WriteFile(ctxT(t), d+"/"+want[i], nil); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	hd := mustOpen(t, r.a, d)
	got, err := hd.ReadDir(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("ReadDir: %d names, want %d in order", len(got), len(want))
	}
	pages := r.p.Count(wire.MReadDir)
	if pages < 2 {
		t.Fatalf("the listing took %d ReadDir calls; want it paged", pages)
	}
	if again, err := hd.ReadDir(ctxT(t)); err != nil || len(again) != n {
		t.Fatalf("second listing: %d names, %v", len(again), err)
	}
	wantCalls(t, r.p, wire.MReadDir, pages) // the whole listing was cached

	r.write(t, d+"/zzz", "")
	got, err = hd.ReadDir(ctxT(t))
	if err != nil || len(got) != n+1 || got[n] != "zzz" {
		t.Fatalf("after a create: %d names (last %q), %v", len(got), got[len(got)-1], err)
	}
}
