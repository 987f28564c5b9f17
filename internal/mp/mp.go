// Package mp holds the pieces of the hand-written msgpack codecs of the
// messages on every call's path (wire.Request, wire.Response, KeepAlive,
// events, lock calls, fs.Stat).
//
// msgpack's reflective codec looks a struct's fields up in a type cache
// (a sync.Map keyed by reflect.Type) for every value it encodes or
// decodes, and sets each field through reflect: a fifth of the master's
// CPU at 64 sessions and of the client's in a 100-watcher fan-out. The
// hand-written codecs write and read the same encoding — a map keyed by
// each field's msgpack tag, omitempty fields left out when empty — so
// either side may use either codec, and unknown keys are skipped as the
// reflective decoder skips them. Messages write integers in their
// smallest form (the reflective encoder writes a uint64 field in nine
// bytes; every msgpack decoder reads both); what is stored writes them as
// the reflective encoder does (Enc.Fixed), byte for byte.
package mp

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

// Enc writes a map's entries to an encoder and keeps the first error, so
// a codec writes its fields without checking each one.
type Enc struct {
	E   *msgpack.Encoder
	Err error
	// Fixed writes integers at their type's width, as the reflective
	// encoder does (uint64 in nine bytes): for what is stored (log entries,
	// snapshots), so that a build writes the bytes earlier builds wrote.
	Fixed bool
}

// Map starts a map of n entries.
func (w *Enc) Map(n int) {
	if w.Err == nil {
		w.Err = w.E.EncodeMapLen(n)
	}
}

// Key writes a key whose value the caller writes next if Key returns true.
func (w *Enc) Key(k string) bool {
	if w.Err == nil {
		w.Err = w.E.EncodeString(k)
	}
	return w.Err == nil
}

// Uint writes k: v, a uint64.
func (w *Enc) Uint(k string, v uint64) {
	if !w.Key(k) {
		return
	}
	if w.Fixed {
		w.Err = w.E.EncodeUint64(v)
		return
	}
	w.Err = w.E.EncodeUint(v)
}

// Uint8 writes k: v, a uint8.
func (w *Enc) Uint8(k string, v uint8) {
	if !w.Key(k) {
		return
	}
	if w.Fixed {
		w.Err = w.E.EncodeUint8(v)
		return
	}
	w.Err = w.E.EncodeUint(uint64(v))
}

// Int writes k: v, an int64.
func (w *Enc) Int(k string, v int64) {
	if !w.Key(k) {
		return
	}
	if w.Fixed {
		w.Err = w.E.EncodeInt64(v)
		return
	}
	w.Err = w.E.EncodeInt(v)
}

// Bool writes k: v.
func (w *Enc) Bool(k string, v bool) {
	if w.Key(k) {
		w.Err = w.E.EncodeBool(v)
	}
}

// Str writes k: v.
func (w *Enc) Str(k, v string) {
	if w.Key(k) {
		w.Err = w.E.EncodeString(v)
	}
}

// Bytes writes k: v (nil as msgpack nil, as the reflective encoder does).
func (w *Enc) Bytes(k string, v []byte) {
	if w.Key(k) {
		w.Err = w.E.EncodeBytes(v)
	}
}

// Raw writes k: v, an encoded value (nil when v is empty).
func (w *Enc) Raw(k string, v msgpack.RawMessage) {
	if !w.Key(k) {
		return
	}
	if len(v) == 0 {
		w.Err = w.E.EncodeNil()
		return
	}
	w.Err = v.EncodeMsgpack(w.E)
}

// Strs writes k: v as an array of strings.
func (w *Enc) Strs(k string, v []string) {
	if !w.Key(k) {
		return
	}
	if v == nil {
		w.Err = w.E.EncodeNil()
		return
	}
	if w.Err = w.E.EncodeArrayLen(len(v)); w.Err != nil {
		return
	}
	for _, s := range v {
		if w.Err = w.E.EncodeString(s); w.Err != nil {
			return
		}
	}
}

// The omitempty forms: k: v only when v is not zero.

// UintOmit writes k: v unless v is 0.
func (w *Enc) UintOmit(k string, v uint64) {
	if v != 0 {
		w.Uint(k, v)
	}
}

// IntOmit writes k: v unless v is 0.
func (w *Enc) IntOmit(k string, v int64) {
	if v != 0 {
		w.Int(k, v)
	}
}

// StrOmit writes k: v unless v is "".
func (w *Enc) StrOmit(k, v string) {
	if v != "" {
		w.Str(k, v)
	}
}

// BytesOmit writes k: v unless v is empty.
func (w *Enc) BytesOmit(k string, v []byte) {
	if len(v) > 0 {
		w.Bytes(k, v)
	}
}

// BoolOmit writes k: true if v.
func (w *Enc) BoolOmit(k string, v bool) {
	if v {
		w.Bool(k, true)
	}
}

// Count counts the fields that are present: Count(a != 0, b != "") is the
// length of a map whose omitempty fields a and b are left out when empty.
func Count(present ...bool) int {
	n := 0
	for _, p := range present {
		if p {
			n++
		}
	}
	return n
}

// maxKey is the longest key the codecs know; a longer one is unknown.
const maxKey = 8

// Fields reads a map (or nil, an empty one) and calls field for each key,
// which must decode the key's value and report whether it knew the key;
// the value of an unknown key is skipped.
func Fields(d *msgpack.Decoder, field func(key []byte) (bool, error)) error {
	n, err := d.DecodeMapLen()
	if err != nil {
		return err
	}
	var buf [maxKey]byte
	for i := 0; i < n; i++ {
		kl, err := d.DecodeBytesLen()
		if err != nil {
			return err
		}
		known := false
		switch {
		case kl < 0: // a nil key
		case kl <= maxKey:
			if err := d.ReadFull(buf[:kl]); err != nil {
				return err
			}
			if known, err = field(buf[:kl]); err != nil {
				return fmt.Errorf("field %q: %w", buf[:kl], err)
			}
		default:
			if err := d.ReadFull(make([]byte, kl)); err != nil {
				return err
			}
		}
		if !known {
			if err := d.Skip(); err != nil {
				return err
			}
		}
	}
	return nil
}

// Array reads an array (nil for msgpack nil), each element with elem.
func Array[T any](d *msgpack.Decoder, elem func(*msgpack.Decoder) (T, error)) ([]T, error) {
	n, err := d.DecodeArrayLen()
	if err != nil || n < 0 {
		return nil, err
	}
	out := make([]T, 0, min(n, 1024))
	for i := 0; i < n; i++ {
		v, err := elem(d)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// Strs reads an array of strings (nil for msgpack nil).
func Strs(d *msgpack.Decoder) ([]string, error) {
	return Array(d, (*msgpack.Decoder).DecodeString)
}

// Uint8 reads an unsigned integer that must fit a byte.
func Uint8(d *msgpack.Decoder) (uint8, error) {
	v, err := d.DecodeUint64()
	if err == nil && v > 0xff {
		err = fmt.Errorf("%d does not fit a byte", v)
	}
	return uint8(v), err
}

// IsNil reports whether the next value is msgpack nil, and if so reads it.
func IsNil(d *msgpack.Decoder) (bool, error) {
	c, err := d.PeekCode()
	if err != nil || c != 0xc0 {
		return false, err
	}
	return true, d.DecodeNil()
}

// The codecs' own encoders and decoders, made with the library's defaults
// (msgpack's pooled ones may carry options another user set).
type encoder struct {
	buf bytes.Buffer
	enc *msgpack.Encoder
}

var encoders = sync.Pool{New: func() any {
	e := &encoder{}
	e.enc = msgpack.NewEncoder(&e.buf)
	return e
}}

type decoder struct {
	r   bytes.Reader
	dec *msgpack.Decoder
}

var decoders = sync.Pool{New: func() any {
	d := &decoder{}
	d.dec = msgpack.NewDecoder(&d.r)
	return d
}}

// Append appends v's encoding to dst: with v's own codec if it has one,
// else msgpack's. Like the standard library's Append functions it writes
// into dst's spare capacity when that suffices (a reused frame buffer
// then costs no allocation).
func Append(dst []byte, v any) ([]byte, error) {
	e := encoders.Get().(*encoder)
	e.buf.Reset()
	var err error
	if ce, ok := v.(msgpack.CustomEncoder); ok {
		err = ce.EncodeMsgpack(e.enc)
	} else {
		err = e.enc.Encode(v)
	}
	out := append(dst, e.buf.Bytes()...)
	if e.buf.Cap() <= 64<<10 {
		encoders.Put(e)
	}
	return out, err
}

// pooledInput is the largest input decoded with a pooled decoder: a
// decoder's buffer grows to the longest string or byte string it reads,
// so one that read a hostile frame's megabyte would keep it in the pool.
const pooledInput = 64 << 10

// DecodeEach calls each until b is used up, each decoding one value from
// d: for values written back to back (a log entry's batch of commands).
// It returns each's first error.
func DecodeEach(b []byte, each func(d *msgpack.Decoder) error) error {
	return withDecoder(b, func(d *decoder) error {
		for d.r.Len() > 0 {
			if err := each(d.dec); err != nil {
				return err
			}
		}
		return nil
	})
}

// Decode decodes b into v: with v's own codec if it has one, else
// msgpack's.
func Decode(b []byte, v any) error {
	return withDecoder(b, func(d *decoder) error {
		if cd, ok := v.(msgpack.CustomDecoder); ok {
			return cd.DecodeMsgpack(d.dec)
		}
		return d.dec.Decode(v)
	})
}

// withDecoder runs fn with a decoder reading b: a pooled one unless b is
// larger than pooledInput.
func withDecoder(b []byte, fn func(d *decoder) error) error {
	var d *decoder
	if len(b) <= pooledInput {
		d = decoders.Get().(*decoder)
		defer decoders.Put(d)
	} else {
		d = decoders.New().(*decoder)
	}
	d.r.Reset(b)
	d.dec.Reset(&d.r)
	defer d.r.Reset(nil) // before Put: the pool keeps no reference to b
	return fn(d)
}

// Raw reads one encoded value as it is; msgpack nil reads as an empty one
// (as the reflective decoder reads it).
func Raw(d *msgpack.Decoder) (msgpack.RawMessage, error) {
	if isNil, err := IsNil(d); err != nil || isNil {
		return nil, err
	}
	return d.DecodeRaw()
}
