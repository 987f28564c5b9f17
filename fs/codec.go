package fs

import (
	"github.com/chubby-dev/chubby/internal/mp"
	"github.com/vmihailenco/msgpack/v5"
)

// Hand-written msgpack codecs of Stat and Sequencer, which ride on every
// lock call, read reply and event (internal/mp says why). They write what
// the reflective codec writes for the struct tags; snapshots written with
// either read back with either (codec_test.go).

// EncodeMsgpack implements msgpack.CustomEncoder.
func (s Stat) EncodeMsgpack(e *msgpack.Encoder) error {
	w := mp.Enc{E: e}
	w.Map(9 + mp.Count(s.Owner != 0))
	w.Uint("i", s.Instance)
	w.Uint("cg", s.ContentGen)
	w.Uint("lg", s.LockGen)
	w.Uint("ag", s.ACLGen)
	w.Uint("ck", s.Checksum)
	w.Int("sz", int64(s.Size))
	w.Bool("dir", s.IsDir)
	w.Bool("eph", s.Ephemeral)
	if s.Owner != 0 {
		w.Uint("own", s.Owner)
	}
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
	w := mp.Enc{E: e}
	w.Map(3)
	w.Str("p", s.Path)
	w.Uint("m", uint64(s.Mode))
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
