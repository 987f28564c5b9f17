package wire

import (
	"github.com/chubby-dev/chubby/fs"
	"github.com/chubby-dev/chubby/internal/mp"
	"github.com/vmihailenco/msgpack/v5"
)

// Hand-written msgpack codecs of the messages every call or KeepAlive
// carries (internal/mp says why). They write what the reflective codec
// writes for the struct tags, so the tags stay the definition of the
// encoding; codec_test.go checks each against the reflective codec both
// ways.

// EncodeMsgpack implements msgpack.CustomEncoder.
func (r Request) EncodeMsgpack(e *msgpack.Encoder) error {
	w := mp.Enc{E: e}
	w.Map(5 + mp.Count(r.Call != 0, r.Acked != 0, len(r.Secret) > 0))
	w.Uint("id", r.ID)
	w.Uint("m", uint64(r.Method))
	w.Uint("e", r.Epoch)
	w.Uint("s", r.Session)
	w.UintOmit("c", r.Call)
	w.UintOmit("a", r.Acked)
	w.BytesOmit("k", r.Secret)
	w.Raw("b", r.Body)
	return w.Err
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (r *Request) DecodeMsgpack(d *msgpack.Decoder) error {
	return mp.Fields(d, func(k []byte) (ok bool, err error) {
		switch string(k) {
		case "id":
			r.ID, err = d.DecodeUint64()
		case "m":
			var m uint8
			m, err = mp.Uint8(d)
			r.Method = Method(m)
		case "e":
			r.Epoch, err = d.DecodeUint64()
		case "s":
			r.Session, err = d.DecodeUint64()
		case "c":
			r.Call, err = d.DecodeUint64()
		case "a":
			r.Acked, err = d.DecodeUint64()
		case "k":
			r.Secret, err = d.DecodeBytes()
		case "b":
			r.Body, err = mp.Raw(d)
		default:
			return false, nil
		}
		return true, err
	})
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (r Response) EncodeMsgpack(e *msgpack.Encoder) error {
	w := mp.Enc{E: e}
	w.Map(1 + mp.Count(r.Code != "", r.Error != "", len(r.Body) > 0, r.More))
	w.Uint("id", r.ID)
	w.StrOmit("c", r.Code)
	w.StrOmit("x", r.Error)
	if len(r.Body) > 0 {
		w.Raw("b", r.Body)
	}
	w.BoolOmit("mo", r.More)
	return w.Err
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (r *Response) DecodeMsgpack(d *msgpack.Decoder) error {
	return mp.Fields(d, func(k []byte) (ok bool, err error) {
		switch string(k) {
		case "id":
			r.ID, err = d.DecodeUint64()
		case "c":
			r.Code, err = d.DecodeString()
		case "x":
			r.Error, err = d.DecodeString()
		case "b":
			r.Body, err = mp.Raw(d)
		case "mo":
			r.More, err = d.DecodeBool()
		default:
			return false, nil
		}
		return true, err
	})
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (a KeepAliveArgs) EncodeMsgpack(e *msgpack.Encoder) error {
	w := mp.Enc{E: e}
	w.Map(mp.Count(a.Urgent, a.AckInval != 0, a.Stream))
	w.BoolOmit("u", a.Urgent)
	w.UintOmit("ai", a.AckInval)
	w.BoolOmit("st", a.Stream)
	return w.Err
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (a *KeepAliveArgs) DecodeMsgpack(d *msgpack.Decoder) error {
	return mp.Fields(d, func(k []byte) (ok bool, err error) {
		switch string(k) {
		case "u":
			a.Urgent, err = d.DecodeBool()
		case "ai":
			a.AckInval, err = d.DecodeUint64()
		case "st":
			a.Stream, err = d.DecodeBool()
		default:
			return false, nil
		}
		return true, err
	})
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (r KeepAliveReply) EncodeMsgpack(e *msgpack.Encoder) error {
	w := mp.Enc{E: e}
	w.Map(1 + mp.Count(len(r.Invalidations) > 0, r.InvalSeq != 0, len(r.Events) > 0, r.Dropped != 0))
	w.Int("ttl", r.TTL)
	if len(r.Invalidations) > 0 {
		w.Strs("inv", r.Invalidations)
	}
	w.UintOmit("is", r.InvalSeq)
	if len(r.Events) > 0 && w.Key("ev") {
		w.Err = e.EncodeArrayLen(len(r.Events))
		for i := range r.Events {
			if w.Err != nil {
				break
			}
			w.Err = r.Events[i].EncodeMsgpack(e)
		}
	}
	w.UintOmit("dr", r.Dropped)
	return w.Err
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (r *KeepAliveReply) DecodeMsgpack(d *msgpack.Decoder) error {
	return mp.Fields(d, func(k []byte) (ok bool, err error) {
		switch string(k) {
		case "ttl":
			r.TTL, err = d.DecodeInt64()
		case "inv":
			r.Invalidations, err = mp.Strs(d)
		case "is":
			r.InvalSeq, err = d.DecodeUint64()
		case "ev":
			r.Events, err = mp.Array(d, decodeEvent)
		case "dr":
			r.Dropped, err = d.DecodeUint64()
		default:
			return false, nil
		}
		return true, err
	})
}

func decodeEvent(d *msgpack.Decoder) (Event, error) {
	var ev Event
	err := ev.DecodeMsgpack(d)
	return ev, err
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (ev Event) EncodeMsgpack(e *msgpack.Encoder) error {
	w := mp.Enc{E: e}
	w.Map(2 + mp.Count(ev.Contents != nil))
	w.Str("t", string(ev.Type))
	w.Str("p", ev.Path)
	if ev.Contents != nil {
		if w.Key("c") {
			w.Err = ev.Contents.EncodeMsgpack(e)
		}
	}
	return w.Err
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (ev *Event) DecodeMsgpack(d *msgpack.Decoder) error {
	return mp.Fields(d, func(k []byte) (ok bool, err error) {
		switch string(k) {
		case "t":
			var t string
			t, err = d.DecodeString()
			ev.Type = EventType(t)
		case "p":
			ev.Path, err = d.DecodeString()
		case "c":
			var isNil bool
			if isNil, err = mp.IsNil(d); err == nil && !isNil {
				ev.Contents = new(EventContents)
				err = ev.Contents.DecodeMsgpack(d)
			}
		default:
			return false, nil
		}
		return true, err
	})
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (c EventContents) EncodeMsgpack(e *msgpack.Encoder) error {
	w := mp.Enc{E: e}
	w.Map(3)
	w.Bytes("d", c.Data)
	if w.Key("st") {
		w.Err = c.Stat.EncodeMsgpack(e)
	}
	w.Uint("is", c.InvalSeq)
	return w.Err
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (c *EventContents) DecodeMsgpack(d *msgpack.Decoder) error {
	return mp.Fields(d, func(k []byte) (ok bool, err error) {
		switch string(k) {
		case "d":
			c.Data, err = d.DecodeBytes()
		case "st":
			err = c.Stat.DecodeMsgpack(d)
		case "is":
			c.InvalSeq, err = d.DecodeUint64()
		default:
			return false, nil
		}
		return true, err
	})
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (a AcquireArgs) EncodeMsgpack(e *msgpack.Encoder) error {
	w := mp.Enc{E: e}
	w.Map(3 + mp.Count(a.Instance != 0, a.Wait, a.WaitID != 0))
	w.Str("p", a.Path)
	w.UintOmit("i", a.Instance)
	w.Uint("m", uint64(a.Mode))
	w.BoolOmit("w", a.Wait)
	w.UintOmit("wid", a.WaitID)
	w.Int("ld", a.LockDelay)
	return w.Err
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (a *AcquireArgs) DecodeMsgpack(d *msgpack.Decoder) error {
	return mp.Fields(d, func(k []byte) (ok bool, err error) {
		switch string(k) {
		case "p":
			a.Path, err = d.DecodeString()
		case "i":
			a.Instance, err = d.DecodeUint64()
		case "m":
			var m uint8
			m, err = mp.Uint8(d)
			a.Mode = fs.Mode(m)
		case "w":
			a.Wait, err = d.DecodeBool()
		case "wid":
			a.WaitID, err = d.DecodeUint64()
		case "ld":
			a.LockDelay, err = d.DecodeInt64()
		default:
			return false, nil
		}
		return true, err
	})
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (a ReleaseArgs) EncodeMsgpack(e *msgpack.Encoder) error {
	w := mp.Enc{E: e}
	w.Map(2)
	w.Str("p", a.Path)
	w.Uint("g", a.Gen)
	return w.Err
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (a *ReleaseArgs) DecodeMsgpack(d *msgpack.Decoder) error {
	return mp.Fields(d, func(k []byte) (ok bool, err error) {
		switch string(k) {
		case "p":
			a.Path, err = d.DecodeString()
		case "g":
			a.Gen, err = d.DecodeUint64()
		default:
			return false, nil
		}
		return true, err
	})
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (r SeqReply) EncodeMsgpack(e *msgpack.Encoder) error {
	w := mp.Enc{E: e}
	w.Map(1)
	if w.Key("seq") {
		w.Err = r.Seq.EncodeMsgpack(e)
	}
	return w.Err
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (r *SeqReply) DecodeMsgpack(d *msgpack.Decoder) error {
	return mp.Fields(d, func(k []byte) (ok bool, err error) {
		if string(k) != "seq" {
			return false, nil
		}
		return true, r.Seq.DecodeMsgpack(d)
	})
}
