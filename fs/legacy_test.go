package fs

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
	"pgregory.net/rapid"
)

// legacyCommand is fs.Command as the builds before the envelope defined
// it: one struct for every op, the log's flat encoding being its msgpack
// form. The tests use it to make log entries as those builds wrote them.
type legacyCommand struct {
	Op        Op         `msgpack:"o"`
	Now       int64      `msgpack:"t"`
	Session   uint64     `msgpack:"s,omitempty"`
	Path      string     `msgpack:"p,omitempty"`
	Instance  uint64     `msgpack:"i,omitempty"`
	Data      []byte     `msgpack:"d,omitempty"`
	IsDir     bool       `msgpack:"dir,omitempty"`
	Ephemeral bool       `msgpack:"eph,omitempty"`
	Create    bool       `msgpack:"c,omitempty"`
	Exclusive bool       `msgpack:"x,omitempty"`
	CAS       bool       `msgpack:"cas,omitempty"`
	Gen       uint64     `msgpack:"g,omitempty"`
	Seq       *Sequencer `msgpack:"seq,omitempty"`
	Mode      Mode       `msgpack:"m,omitempty"`
	Wait      bool       `msgpack:"w,omitempty"`
	WaitID    uint64     `msgpack:"wid,omitempty"`
	LockDelay int64      `msgpack:"ld,omitempty"`
	TTL       int64      `msgpack:"ttl,omitempty"`
	Expired   bool       `msgpack:"exp,omitempty"`
	CallID    uint64     `msgpack:"cid,omitempty"`
	Acked     uint64     `msgpack:"ack,omitempty"`
	Nonce     uint64     `msgpack:"nc,omitempty"`
}

// failer is what the helpers below need of *testing.T, *testing.F and
// *rapid.T.
type failer interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

func (l *legacyCommand) encode(t failer) []byte {
	t.Helper()
	b, err := msgpack.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// used is l with only the fields its op reads: what the old Apply looked
// at, and so what a decoded command must keep.
func (l legacyCommand) used() legacyCommand {
	u := legacyCommand{Op: l.Op, Now: l.Now, Session: l.Session, CallID: l.CallID, Acked: l.Acked}
	switch l.Op {
	case OpCreateSession:
		u.TTL, u.Nonce = l.TTL, l.Nonce
	case OpEndSession:
		u.Expired = l.Expired
	case OpCreate:
		// Seq: a fenced create (added with the recipes). No earlier build
		// wrote it into a create, so no old log holds one there.
		u.Path, u.IsDir, u.Ephemeral, u.Exclusive, u.Data, u.Seq = l.Path, l.IsDir, l.Ephemeral, l.Exclusive, l.Data, l.Seq
	case OpSetContents:
		u.Path, u.Instance, u.Data, u.Create, u.CAS, u.Gen, u.Seq = l.Path, l.Instance, l.Data, l.Create, l.CAS, l.Gen, l.Seq
	case OpDelete:
		u.Path, u.Instance, u.Seq = l.Path, l.Instance, l.Seq
	case OpAcquire:
		u.Path, u.Instance, u.Mode, u.Wait, u.WaitID, u.LockDelay = l.Path, l.Instance, l.Mode, l.Wait, l.WaitID, l.LockDelay
	case OpCancelWait:
		u.Path, u.WaitID = l.Path, l.WaitID
	case OpRelease:
		u.Path, u.Gen = l.Path, l.Gen
	case OpGrantDelayed, OpRemoveServer:
		u.Path = l.Path
	case OpSetACL:
		// Added with ACLs, after the envelope: no old log holds one, but
		// garbage may decode to one, and its legacy fields must survive.
		u.Path, u.Instance = l.Path, l.Instance
	}
	return u
}

// legacyDecodeCommands is DecodeCommands as the builds before the envelope
// had it.
func legacyDecodeCommands(b []byte) ([]*legacyCommand, error) {
	rd := bytes.NewReader(b)
	dec := msgpack.NewDecoder(rd)
	var out []*legacyCommand
	for rd.Len() > 0 {
		var c legacyCommand
		if err := dec.Decode(&c); err != nil {
			return nil, errf(ErrBadRequest, "decode command %d of batch: %v", len(out), err)
		}
		if c.Op == OpInvalid || c.Op >= opMax {
			return nil, errf(ErrBadRequest, "command %d of batch: unknown op %d", len(out), c.Op)
		}
		out = append(out, &c)
	}
	if len(out) == 0 {
		return nil, errf(ErrBadRequest, "empty command batch")
	}
	return out, nil
}

// sameAsLegacy checks that b decodes as the old build decoded it: the same
// error, or commands that keep every field their op reads and encode back
// to the old bytes of those fields.
func sameAsLegacy(t failer, b []byte) []*Command {
	t.Helper()
	old, oldErr := legacyDecodeCommands(b)
	got, err := DecodeCommands(b)
	if fmt.Sprint(err) != fmt.Sprint(oldErr) {
		t.Fatalf("DecodeCommands(%x) = %v; the old build said %v", b, err, oldErr)
	}
	if err != nil {
		return nil
	}
	if len(got) != len(old) {
		t.Fatalf("DecodeCommands(%x): %d commands, the old build %d", b, len(got), len(old))
	}
	for i, c := range got {
		enc, err := c.Encode()
		if err != nil {
			t.Fatalf("command %d of %x: re-encode: %v", i, b, err)
		}
		u := old[i].used()
		if want := u.encode(t); !bytes.Equal(enc, want) {
			t.Fatalf("command %d of %x re-encodes to %x, want %x (%+v)", i, b, enc, want, u)
		}
	}
	return got
}

// genLegacy draws an old-format command of a valid op with any fields set,
// used by its op or not.
func genLegacy(t *rapid.T) legacyCommand {
	maybe := func(name string, v uint64) uint64 {
		if rapid.Bool().Draw(t, name) {
			return v
		}
		return 0
	}
	l := legacyCommand{
		Op:        Op(rapid.IntRange(int(OpNewEpoch), int(opMax)-1).Draw(t, "op")),
		Now:       rapid.Int64().Draw(t, "now"),
		Session:   maybe("s?", rapid.Uint64().Draw(t, "s")),
		Path:      rapid.SampledFrom([]string{"", "/ls/local/a", "node3", "x\x00y"}).Draw(t, "path"),
		Instance:  maybe("i?", rapid.Uint64().Draw(t, "i")),
		IsDir:     rapid.Bool().Draw(t, "dir"),
		Ephemeral: rapid.Bool().Draw(t, "eph"),
		Create:    rapid.Bool().Draw(t, "create"),
		Exclusive: rapid.Bool().Draw(t, "excl"),
		CAS:       rapid.Bool().Draw(t, "cas"),
		Gen:       maybe("g?", rapid.Uint64().Draw(t, "g")),
		Mode:      Mode(rapid.IntRange(0, 3).Draw(t, "mode")),
		Wait:      rapid.Bool().Draw(t, "wait"),
		WaitID:    maybe("wid?", rapid.Uint64().Draw(t, "wid")),
		LockDelay: int64(maybe("ld?", uint64(rapid.Int64().Draw(t, "ld")))),
		TTL:       int64(maybe("ttl?", uint64(rapid.Int64().Draw(t, "ttl")))),
		Expired:   rapid.Bool().Draw(t, "exp"),
		CallID:    maybe("cid?", rapid.Uint64().Draw(t, "cid")),
		Acked:     maybe("ack?", rapid.Uint64().Draw(t, "ack")),
		Nonce:     maybe("nc?", rapid.Uint64().Draw(t, "nc")),
	}
	if rapid.Bool().Draw(t, "data?") {
		l.Data = []byte(rapid.String().Draw(t, "data"))
	}
	if rapid.Bool().Draw(t, "seq?") {
		l.Seq = &Sequencer{Path: "/ls/local/l", Mode: Mode(rapid.IntRange(1, 2).Draw(t, "seq-mode")), Gen: rapid.Uint64().Draw(t, "seq-gen")}
	}
	return l
}

// Log entries written by the builds before the envelope decode to commands
// that keep every field the old Apply read (their results are pinned by
// testdata/oldformat.txt), and a command of this build encodes to exactly
// the bytes the old build wrote for it, so old and new logs are one format.
func TestLegacyEntriesDecode(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var entry []byte
		for i, n := 0, rapid.IntRange(1, 4).Draw(t, "batch"); i < n; i++ {
			l := genLegacy(t)
			entry = append(entry, l.encode(t)...)
		}
		sameAsLegacy(t, entry)
	})
	// Garbage and bad ops are rejected with the old build's errors.
	rapid.Check(t, func(t *rapid.T) {
		sameAsLegacy(t, rapid.SliceOf(rapid.Byte()).Draw(t, "bytes"))
	})
	bad := (&legacyCommand{Op: opMax}).encode(t)
	wrongType, err := msgpack.Marshal(map[string]any{"o": int(OpCreate), "p": 5})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]byte{nil, {0xc0}, bad, wrongType, append((&legacyCommand{Op: OpNewEpoch}).encode(t), bad...)} {
		if _, err := DecodeCommands(b); !errors.Is(err, ErrBadRequest) {
			t.Errorf("DecodeCommands(%x) = %v, want ErrBadRequest", b, err)
		}
		sameAsLegacy(t, b)
	}
}
