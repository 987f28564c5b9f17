package fs

import (
	"github.com/chubby-dev/chubby/internal/mp"
	"github.com/vmihailenco/msgpack/v5"
)

// Hand-written msgpack codecs of Stat, Sequencer and the log's commands,
// which ride on every lock call, read reply, event and log entry
// (internal/mp says why). They write the bytes the reflective codec writes
// for the struct tags, so logs and snapshots are those earlier builds
// wrote (codec_test.go).

// EncodeMsgpack implements msgpack.CustomEncoder.
func (s Stat) EncodeMsgpack(e *msgpack.Encoder) error {
	w := mp.Enc{E: e, Fixed: true}
	w.Map(9 + mp.Count(s.Owner != 0))
	w.Uint("i", s.Instance)
	w.Uint("cg", s.ContentGen)
	w.Uint("lg", s.LockGen)
	w.Uint("ag", s.ACLGen)
	w.Uint("ck", s.Checksum)
	if w.Key("sz") {
		w.Err = e.EncodeInt(int64(s.Size)) // msgpack writes an int compact
	}
	w.Bool("dir", s.IsDir)
	w.Bool("eph", s.Ephemeral)
	w.UintOmit("own", s.Owner)
	w.Int("mt", s.Mtime)
	return w.Err
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (s *Stat) DecodeMsgpack(d *msgpack.Decoder) error {
	return mp.Fields(d, func(k []byte) (ok bool, err error) {
		switch string(k) {
		case "i":
			s.Instance, err = d.DecodeUint64()
		case "cg":
			s.ContentGen, err = d.DecodeUint64()
		case "lg":
			s.LockGen, err = d.DecodeUint64()
		case "ag":
			s.ACLGen, err = d.DecodeUint64()
		case "ck":
			s.Checksum, err = d.DecodeUint64()
		case "sz":
			s.Size, err = d.DecodeInt()
		case "dir":
			s.IsDir, err = d.DecodeBool()
		case "eph":
			s.Ephemeral, err = d.DecodeBool()
		case "own":
			s.Owner, err = d.DecodeUint64()
		case "mt":
			s.Mtime, err = d.DecodeInt64()
		default:
			return false, nil
		}
		return true, err
	})
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (s Sequencer) EncodeMsgpack(e *msgpack.Encoder) error {
	w := mp.Enc{E: e, Fixed: true}
	w.Map(3)
	w.Str("p", s.Path)
	w.Uint8("m", uint8(s.Mode))
	w.Uint("g", s.Gen)
	return w.Err
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (s *Sequencer) DecodeMsgpack(d *msgpack.Decoder) error {
	return mp.Fields(d, func(k []byte) (ok bool, err error) {
		switch string(k) {
		case "p":
			s.Path, err = d.DecodeString()
		case "m":
			var m uint8
			m, err = mp.Uint8(d)
			s.Mode = Mode(m)
		case "g":
			s.Gen, err = d.DecodeUint64()
		default:
			return false, nil
		}
		return true, err
	})
}

// EncodeMsgpack implements msgpack.CustomEncoder: the fields in the
// struct's order, each omitempty one left out when zero (a Sequencer or
// ACL when nil or IsZero, as msgpack leaves out a zero value's pointer).
func (f *flatCommand) EncodeMsgpack(e *msgpack.Encoder) error {
	w := mp.Enc{E: e, Fixed: true}
	w.Map(2 + mp.Count(f.Session != 0, f.Path != "", f.Instance != 0, len(f.Data) > 0, f.IsDir, f.Ephemeral,
		f.Create, f.Exclusive, f.CAS, f.Gen != 0, f.Seq != nil && !f.Seq.IsZero(), f.Mode != 0, f.Wait, f.WaitID != 0, f.LockDelay != 0,
		f.TTL != 0, f.Expired, f.CallID != 0, f.Acked != 0, f.Nonce != 0, len(f.Secret) > 0, f.Principal != "",
		f.NoCache, f.Caller != "", f.Admin, f.ACL != nil && !f.ACL.IsZero(), len(f.Names) > 0))
	w.Uint8("o", uint8(f.Op))
	w.Int("t", f.Now)
	w.UintOmit("s", f.Session)
	w.StrOmit("p", f.Path)
	w.UintOmit("i", f.Instance)
	w.BytesOmit("d", f.Data)
	w.BoolOmit("dir", f.IsDir)
	w.BoolOmit("eph", f.Ephemeral)
	w.BoolOmit("c", f.Create)
	w.BoolOmit("x", f.Exclusive)
	w.BoolOmit("cas", f.CAS)
	w.UintOmit("g", f.Gen)
	if f.Seq != nil && !f.Seq.IsZero() && w.Key("seq") {
		w.Err = f.Seq.EncodeMsgpack(e)
	}
	if f.Mode != 0 {
		w.Uint8("m", uint8(f.Mode))
	}
	w.BoolOmit("w", f.Wait)
	w.UintOmit("wid", f.WaitID)
	w.IntOmit("ld", f.LockDelay)
	w.IntOmit("ttl", f.TTL)
	w.BoolOmit("exp", f.Expired)
	w.UintOmit("cid", f.CallID)
	w.UintOmit("ack", f.Acked)
	w.UintOmit("nc", f.Nonce)
	w.BytesOmit("sk", f.Secret)
	w.StrOmit("pr", f.Principal)
	w.BoolOmit("ncache", f.NoCache)
	w.StrOmit("cl", f.Caller)
	w.BoolOmit("adm", f.Admin)
	if f.ACL != nil && !f.ACL.IsZero() && w.Key("acl") {
		w.Err = e.Encode(f.ACL) // rare (Create with ACLs, SetACL): msgpack's own
	}
	if len(f.Names) > 0 {
		w.Strs("nm", f.Names)
	}
	return w.Err
}

// DecodeMsgpack implements msgpack.CustomDecoder: what the reflective
// decoder reads for the struct tags (unknown keys skipped; a key written
// twice, the last one kept), checked against it on random values
// (TestCommandDecodeMatchesReflection).
func (f *flatCommand) DecodeMsgpack(d *msgpack.Decoder) error {
	return mp.Fields(d, func(k []byte) (ok bool, err error) {
		switch string(k) {
		case "o":
			var o uint8
			o, err = mp.Uint8(d)
			f.Op = Op(o)
		case "t":
			f.Now, err = d.DecodeInt64()
		case "s":
			f.Session, err = d.DecodeUint64()
		case "p":
			f.Path, err = d.DecodeString()
		case "i":
			f.Instance, err = d.DecodeUint64()
		case "d":
			f.Data, err = d.DecodeBytes()
		case "dir":
			f.IsDir, err = d.DecodeBool()
		case "eph":
			f.Ephemeral, err = d.DecodeBool()
		case "c":
			f.Create, err = d.DecodeBool()
		case "x":
			f.Exclusive, err = d.DecodeBool()
		case "cas":
			f.CAS, err = d.DecodeBool()
		case "g":
			f.Gen, err = d.DecodeUint64()
		case "seq":
			var isNil bool
			if isNil, err = mp.IsNil(d); err == nil {
				f.Seq = nil
				if !isNil {
					f.Seq = new(Sequencer)
					err = f.Seq.DecodeMsgpack(d)
				}
			}
		case "m":
			var m uint8
			m, err = mp.Uint8(d)
			f.Mode = Mode(m)
		case "w":
			f.Wait, err = d.DecodeBool()
		case "wid":
			f.WaitID, err = d.DecodeUint64()
		case "ld":
			f.LockDelay, err = d.DecodeInt64()
		case "ttl":
			f.TTL, err = d.DecodeInt64()
		case "exp":
			f.Expired, err = d.DecodeBool()
		case "cid":
			f.CallID, err = d.DecodeUint64()
		case "ack":
			f.Acked, err = d.DecodeUint64()
		case "nc":
			f.Nonce, err = d.DecodeUint64()
		case "sk":
			f.Secret, err = d.DecodeBytes()
		case "pr":
			f.Principal, err = d.DecodeString()
		case "ncache":
			f.NoCache, err = d.DecodeBool()
		case "cl":
			f.Caller, err = d.DecodeString()
		case "adm":
			f.Admin, err = d.DecodeBool()
		case "acl":
			f.ACL = nil
			err = d.Decode(&f.ACL) // rare (Create with ACLs, SetACL): msgpack's own
		case "nm":
			f.Names, err = mp.Strs(d)
		default:
			return false, nil
		}
		return true, err
	})
}
