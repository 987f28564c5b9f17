package fs

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"

	"github.com/chubby-dev/chubby/internal/mp"
	"github.com/vmihailenco/msgpack/v5"
	"pgregory.net/rapid"
)

// The hand-written codecs (codec.go) write the bytes msgpack's reflective
// codec writes for the struct tags: log entries and snapshots are those
// earlier builds wrote. Each type is compared with a copy of its struct
// that has no methods, on random values.

type (
	plainFlat      flatCommand
	plainStat      Stat
	plainSequencer Sequencer
)

func sameBytes(t *rapid.T, what string, v, plain any) {
	mine, err := mp.Append(nil, v)
	if err != nil {
		t.Fatalf("%s: hand-written encode: %v", what, err)
	}
	refl, err := msgpack.Marshal(plain)
	if err != nil {
		t.Fatalf("%s: reflective encode: %v", what, err)
	}
	if !bytes.Equal(mine, refl) {
		t.Fatalf("%s: hand-written %x, reflective %x", what, mine, refl)
	}
}

func TestCodecsWriteReflectiveBytes(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		u := func(name string) uint64 {
			return rapid.SampledFrom([]uint64{0, 0, 1, 200, 1 << 33, ^uint64(0)}).Draw(t, name)
		}
		i := func(name string) int64 { return int64(u(name)) }
		b := rapid.Bool()
		str := rapid.SampledFrom([]string{"", "", "/ls/local/a", "x\x00y"})
		bs := func(name string) []byte {
			if s := str.Draw(t, name); s != "" {
				return []byte(s)
			}
			return nil
		}
		f := flatCommand{Op: Op(u("o") % 256), Now: i("t"), Session: u("s"), Path: str.Draw(t, "p"), Instance: u("i"), Data: bs("d"),
			IsDir: b.Draw(t, "dir"), Ephemeral: b.Draw(t, "eph"), Create: b.Draw(t, "c"), Exclusive: b.Draw(t, "x"), CAS: b.Draw(t, "cas"),
			Gen: u("g"), Mode: Mode(u("m") % 256), Wait: b.Draw(t, "w"), WaitID: u("wid"), LockDelay: i("ld"), TTL: i("ttl"),
			Expired: b.Draw(t, "exp"), CallID: u("cid"), Acked: u("ack"), Nonce: u("nc"), Secret: bs("sk"), Principal: str.Draw(t, "pr"),
			NoCache: b.Draw(t, "ncache"), Caller: str.Draw(t, "cl"), Admin: b.Draw(t, "adm")}
		if b.Draw(t, "seq?") {
			f.Seq = &Sequencer{Path: str.Draw(t, "seq-p"), Mode: Mode(u("seq-m") % 256), Gen: u("seq-g")}
			sameBytes(t, "sequencer", f.Seq, (*plainSequencer)(f.Seq))
		}
		if b.Draw(t, "acl?") {
			f.ACL = &ACL{Write: str.Draw(t, "acl-w")}
		}
		if b.Draw(t, "names?") {
			f.Names = []string{str.Draw(t, "nm"), "admins"}
		}
		sameBytes(t, "command", &f, (*plainFlat)(&f))
		st := Stat{Instance: u("si"), ContentGen: u("scg"), LockGen: u("slg"), ACLGen: u("sag"), Checksum: u("sck"), Size: int(i("ssz")),
			IsDir: b.Draw(t, "sdir"), Ephemeral: b.Draw(t, "seph"), Owner: u("sown"), Mtime: i("smt")}
		sameBytes(t, "stat", &st, (*plainStat)(&st))
		var back Stat
		if err := msgpack.Unmarshal(must(msgpack.Marshal(&st)), &back); err != nil || back != st {
			t.Fatalf("stat round trip: %+v, %v; want %+v", back, err, st)
		}
	})
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// BenchmarkCommandEncode: an Acquire's log entry, by the hand-written
// encoder and by msgpack's reflective one.
//
//	go test -run XXX -bench CommandEncode -benchmem ./fs
func BenchmarkCommandEncode(b *testing.B) {
	c := &Command{Op: OpAcquire, Now: 1 << 60, Session: 1 << 40, CallID: 77, Acked: 76, Caller: "anonymous",
		Body: &Acquire{Path: "/ls/local/bench/lock/17", Instance: 3, Mode: Exclusive, LockDelay: 1e9}}
	b.Run("hand-written", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := c.Encode(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reflective", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := msgpack.Marshal((*plainFlat)(c.flatten())); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestCommandDecodeMatchesReflection: a log entry's command decodes by the
// hand-written decoder to what the reflective one gives for the struct
// tags — on maps whose keys are the command's, unknown ones, repeated
// ones, with values of every msgpack type — and fails where it fails.
func TestCommandDecodeMatchesReflection(t *testing.T) {
	keys := []string{"o", "t", "s", "p", "i", "d", "dir", "eph", "c", "x", "cas", "g", "seq", "m", "w", "wid", "ld", "ttl",
		"exp", "cid", "ack", "nc", "sk", "pr", "ncache", "cl", "adm", "acl", "nm", "zz", "a-long-unknown-key"}
	values := []any{nil, 0, 1, 255, int64(-3), uint64(1 << 40), "", "/ls/local/a", []byte{}, []byte("xy"), true, false,
		map[string]any{"p": "/ls/local/l", "m": 1, "g": 9}, map[string]any{"w": "admins"}, []any{"a", "b"}, []any{1}, 1.5}
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 12).Draw(t, "n")
		var e bytes.Buffer
		enc := msgpack.NewEncoder(&e)
		if err := enc.EncodeMapLen(n); err != nil {
			t.Fatal(err)
		}
		for range n {
			if err := enc.EncodeString(rapid.SampledFrom(keys).Draw(t, "k")); err != nil {
				t.Fatal(err)
			}
			if err := enc.Encode(rapid.SampledFrom(values).Draw(t, "v")); err != nil {
				t.Fatal(err)
			}
		}
		// The hand-written decoder may refuse what the reflective one reads
		// (an op of 300, which it would cut to a byte; DecodeCommands then
		// reads the entry again reflectively), never the reverse, and what
		// both read they read alike.
		var mine flatCommand
		errMine := msgpack.Unmarshal(e.Bytes(), &mine)
		var refl plainFlat
		errRefl := msgpack.Unmarshal(e.Bytes(), &refl)
		if errMine == nil && errRefl != nil {
			t.Fatalf("%x: hand-written read it, reflective error %v", e.Bytes(), errRefl)
		}
		if errMine == nil && !reflect.DeepEqual(mine, flatCommand(refl)) {
			t.Fatalf("%x:\nhand-written %+v\n  reflective %+v", e.Bytes(), mine, refl)
		}
		// Whole entries: the same commands, or the same error.
		entry := append(e.Bytes(), e.Bytes()...)
		got, err := DecodeCommands(entry)
		want, wantErr := decodeCommandsReflective(entry)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
			t.Fatalf("DecodeCommands(%x) = %v, %v; reflective %v, %v", entry, got, err, want, wantErr)
		}
	})
}

// BenchmarkCommandsDecode: a log entry of 16 Acquires, as a replica's FSM
// decodes it, by the hand-written decoder and by the reflective one.
//
//	go test -run XXX -bench CommandsDecode -benchmem ./fs
func BenchmarkCommandsDecode(b *testing.B) {
	c := &Command{Op: OpAcquire, Now: 1 << 60, Session: 1 << 40, CallID: 77, Acked: 76, Caller: "anonymous",
		Body: &Acquire{Path: "/ls/local/bench/lock/17", Instance: 3, Mode: Exclusive, LockDelay: 1e9}}
	one, err := c.Encode()
	if err != nil {
		b.Fatal(err)
	}
	entry := bytes.Repeat(one, 16)
	for name, decode := range map[string]func([]byte) ([]*Command, error){
		"hand-written": DecodeCommands, "reflective": decodeCommandsReflective,
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if cmds, err := decode(entry); err != nil || len(cmds) != 16 {
					b.Fatal(len(cmds), err)
				}
			}
		})
	}
}
