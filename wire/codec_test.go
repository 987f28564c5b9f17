package wire

import (
	"reflect"
	"testing"

	"github.com/chubby-dev/chubby/fs"
	"github.com/vmihailenco/msgpack/v5"
	"pgregory.net/rapid"
)

// The hand-written codecs (codec.go) must write what msgpack's reflective
// codec writes for the struct tags and read what it writes: a peer built
// with either reads the other. Each type is compared with a copy of its
// struct that has no methods (so msgpack encodes it by reflection), both
// ways, on random values.

type (
	plainRequest        Request
	plainResponse       Response
	plainKeepAliveArgs  KeepAliveArgs
	plainKeepAliveReply KeepAliveReply
	plainEvent          Event
	plainEventContents  EventContents
	plainAcquireArgs    AcquireArgs
	plainReleaseArgs    ReleaseArgs
	plainSeqReply       SeqReply
	plainStat           fs.Stat
	plainSequencer      fs.Sequencer
)

func genBytes(t *rapid.T, label string) []byte {
	b := rapid.SliceOfN(rapid.Byte(), 0, 24).Draw(t, label)
	if len(b) == 0 {
		return nil // nil and empty encode alike when omitted
	}
	return b
}

func genStat(t *rapid.T) fs.Stat {
	u := rapid.Uint64()
	return fs.Stat{
		Instance: u.Draw(t, "i"), ContentGen: u.Draw(t, "cg"), LockGen: u.Draw(t, "lg"),
		ACLGen: u.Draw(t, "ag"), Checksum: u.Draw(t, "ck"), Size: rapid.Int().Draw(t, "sz"),
		IsDir: rapid.Bool().Draw(t, "dir"), Ephemeral: rapid.Bool().Draw(t, "eph"),
		Owner: rapid.SampledFrom([]uint64{0, 1, 1 << 40}).Draw(t, "own"), Mtime: rapid.Int64().Draw(t, "mt"),
	}
}

func genEvent(t *rapid.T) Event {
	ev := Event{Type: EventType(rapid.SampledFrom([]string{"contents_modified", "node_deleted", ""}).Draw(t, "t")), Path: rapid.String().Draw(t, "p")}
	if rapid.Bool().Draw(t, "has contents") {
		ev.Contents = &EventContents{Data: genBytes(t, "d"), Stat: genStat(t), InvalSeq: rapid.Uint64().Draw(t, "is")}
	}
	return ev
}

// check encodes v with its codec and as plain (the same value, reflected),
// and decodes each encoding both ways into fresh values.
func check[T any, P any](t *rapid.T, v *T) {
	plain := (*P)(reflect.ValueOf(v).UnsafePointer())
	mine, err := Marshal(v)
	if err != nil {
		t.Fatalf("hand-written encode: %v", err)
	}
	refl, err := msgpack.Marshal(plain)
	if err != nil {
		t.Fatalf("reflective encode: %v", err)
	}
	for name, b := range map[string][]byte{"hand-written": mine, "reflective": refl} {
		var a T
		if err := Unmarshal(b, &a); err != nil {
			t.Fatalf("hand-written decode of the %s encoding: %v", name, err)
		}
		if !reflect.DeepEqual(&a, v) {
			t.Fatalf("hand-written decode of the %s encoding:\n got %+v\nwant %+v", name, a, *v)
		}
		var p P
		if err := msgpack.Unmarshal(b, &p); err != nil {
			t.Fatalf("reflective decode of the %s encoding: %v", name, err)
		}
		if !reflect.DeepEqual(&p, plain) {
			t.Fatalf("reflective decode of the %s encoding:\n got %+v\nwant %+v", name, p, *plain)
		}
	}
}

func TestCodecsMatchReflection(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		u := rapid.Uint64()
		small := rapid.SampledFrom([]uint64{0, 1, 127, 128, 1 << 32})
		body, _ := msgpack.Marshal(map[string]int{"x": rapid.Int().Draw(t, "body")})

		rq := Request{ID: u.Draw(t, "id"), Method: Method(rapid.Uint8().Draw(t, "m")), Epoch: small.Draw(t, "e"),
			Session: u.Draw(t, "s"), Call: small.Draw(t, "c"), Acked: small.Draw(t, "a"), Secret: genBytes(t, "k"), Body: body}
		check[Request, plainRequest](t, &rq)

		rs := Response{ID: u.Draw(t, "id"), Code: rapid.SampledFrom([]string{"", "not_found"}).Draw(t, "c"), Error: rapid.String().Draw(t, "x")}
		if rapid.Bool().Draw(t, "has body") {
			rs.Body = body
		}
		check[Response, plainResponse](t, &rs)

		ka := KeepAliveArgs{Urgent: rapid.Bool().Draw(t, "u"), AckInval: small.Draw(t, "ai")}
		check[KeepAliveArgs, plainKeepAliveArgs](t, &ka)

		kr := KeepAliveReply{TTL: rapid.Int64().Draw(t, "ttl"), InvalSeq: small.Draw(t, "is"), Dropped: small.Draw(t, "dr")}
		if n := rapid.IntRange(0, 3).Draw(t, "inv"); n > 0 {
			kr.Invalidations = rapid.SliceOfN(rapid.String(), n, n).Draw(t, "paths")
		}
		for range rapid.IntRange(0, 3).Draw(t, "events") {
			kr.Events = append(kr.Events, genEvent(t))
		}
		check[KeepAliveReply, plainKeepAliveReply](t, &kr)

		ev := genEvent(t)
		check[Event, plainEvent](t, &ev)
		ec := EventContents{Data: genBytes(t, "d"), Stat: genStat(t), InvalSeq: u.Draw(t, "is")}
		check[EventContents, plainEventContents](t, &ec)

		aa := AcquireArgs{Path: rapid.String().Draw(t, "p"), Instance: small.Draw(t, "i"), Mode: fs.Mode(rapid.Uint8().Draw(t, "m")),
			Wait: rapid.Bool().Draw(t, "w"), WaitID: small.Draw(t, "wid"), LockDelay: rapid.Int64().Draw(t, "ld")}
		check[AcquireArgs, plainAcquireArgs](t, &aa)
		ra := ReleaseArgs{Path: rapid.String().Draw(t, "p"), Gen: u.Draw(t, "g")}
		check[ReleaseArgs, plainReleaseArgs](t, &ra)
		sq := SeqReply{Seq: fs.Sequencer{Path: rapid.String().Draw(t, "p"), Mode: fs.Mode(rapid.Uint8().Draw(t, "m")), Gen: u.Draw(t, "g")}}
		check[SeqReply, plainSeqReply](t, &sq)
		check[fs.Sequencer, plainSequencer](t, &sq.Seq)
		st := genStat(t)
		check[fs.Stat, plainStat](t, &st)
	})
}

// TestCodecsSkipUnknownFields: a message from a newer peer, with a field
// this build does not know, decodes as the reflective decoder would.
func TestCodecsSkipUnknownFields(t *testing.T) {
	b, err := msgpack.Marshal(map[string]any{"id": 7, "zz": []any{1, "x", map[string]int{"a": 1}}, "a-very-long-key": true, "b": map[string]int{"x": 1}, "m": 3})
	if err != nil {
		t.Fatal(err)
	}
	r, err := DecodeRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	if r.ID != 7 || r.Method != 3 || len(r.Body) == 0 {
		t.Fatalf("decoded %+v", r)
	}
}

// TestCodecsRejectWrongTypes: a field of the wrong type is an error that
// names the field, not a zero value.
func TestCodecsRejectWrongTypes(t *testing.T) {
	for _, m := range []map[string]any{
		{"id": "seven"},
		{"m": 300},
		{"s": []int{1}},
		{"k": 5},
	} {
		b, _ := msgpack.Marshal(m)
		if _, err := DecodeRequest(b); err == nil {
			t.Errorf("%v decoded without an error", m)
		}
	}
	b, _ := msgpack.Marshal(map[string]any{"ttl": 1, "ev": []any{map[string]any{"c": map[string]any{"st": map[string]any{"dir": "yes"}}}}})
	var kr KeepAliveReply
	if err := Unmarshal(b, &kr); err == nil {
		t.Errorf("an event whose stat has dir: \"yes\" decoded: %+v", kr)
	}
}

// BenchmarkCodec: a KeepAlive request and a reply carrying one event with
// contents, encoded and decoded by the hand-written codecs and by msgpack's
// reflective codec (the plain copies of the types).
//
//	go test -run XXX -bench Codec -benchmem ./wire
func BenchmarkCodec(b *testing.B) {
	body, _ := Marshal(KeepAliveArgs{AckInval: 12})
	req := Request{ID: 991, Method: MKeepAlive, Epoch: 3, Session: 1 << 40, Secret: make([]byte, 16), Body: body}
	rep := KeepAliveReply{TTL: int64(12e9), InvalSeq: 40, Events: []Event{{Type: "contents_modified", Path: "/ls/local/bench/config",
		Contents: &EventContents{Data: make([]byte, 100), Stat: fs.Stat{Instance: 9, ContentGen: 4000, Size: 100, Mtime: 1 << 60}, InvalSeq: 40}}}}
	run := func(b *testing.B, enc func() ([]byte, error), dec func([]byte) error) {
		b.ReportAllocs()
		for range b.N {
			m, err := enc()
			if err != nil {
				b.Fatal(err)
			}
			if err := dec(m); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("request/hand-written", func(b *testing.B) {
		run(b, func() ([]byte, error) { return Marshal(&req) }, func(m []byte) error { _, err := DecodeRequest(m); return err })
	})
	b.Run("request/reflective", func(b *testing.B) {
		run(b, func() ([]byte, error) { return msgpack.Marshal((*plainRequest)(&req)) },
			func(m []byte) error { var r plainRequest; return msgpack.Unmarshal(m, &r) })
	})
	b.Run("event-reply/hand-written", func(b *testing.B) {
		run(b, func() ([]byte, error) { return Marshal(&rep) }, func(m []byte) error { var r KeepAliveReply; return Unmarshal(m, &r) })
	})
	b.Run("event-reply/reflective", func(b *testing.B) {
		// plainKeepAliveReply still reaches Event's own codec for its events.
		type plainReply struct {
			TTL      int64         `msgpack:"ttl"`
			InvalSeq uint64        `msgpack:"is,omitempty"`
			Events   []plainEvent2 `msgpack:"ev,omitempty"`
		}
		pr := plainReply{TTL: rep.TTL, InvalSeq: rep.InvalSeq, Events: []plainEvent2{{Type: "contents_modified", Path: rep.Events[0].Path,
			Contents: &plainContents2{Data: rep.Events[0].Contents.Data, Stat: plainStat(rep.Events[0].Contents.Stat), InvalSeq: 40}}}}
		run(b, func() ([]byte, error) { return msgpack.Marshal(&pr) }, func(m []byte) error { var r plainReply; return msgpack.Unmarshal(m, &r) })
	})
}

type plainEvent2 struct {
	Type     string          `msgpack:"t"`
	Path     string          `msgpack:"p"`
	Contents *plainContents2 `msgpack:"c,omitempty"`
}

type plainContents2 struct {
	Data     []byte    `msgpack:"d"`
	Stat     plainStat `msgpack:"st"`
	InvalSeq uint64    `msgpack:"is"`
}
