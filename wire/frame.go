package wire

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/chubby-dev/chubby/internal/mp"
)

// MaxFrame is the largest frame either side accepts: the content limit plus
// room for the envelope.
const MaxFrame = 1 << 20

// ErrFrameTooLarge is returned by ReadFrame for a length prefix over MaxFrame.
var ErrFrameTooLarge = errors.New("frame too large")

// ReadFrame reads one frame body. It never allocates more than MaxFrame.
func ReadFrame(r *bufio.Reader) ([]byte, error) {
	b, _, err := ReadFrameReserving(r, nil)
	return b, err
}

// FrameBuffered reports whether r's buffer already holds a whole frame,
// header and body: reading it then makes no system call and cannot block,
// so a reader needs no deadline for it.
func FrameBuffered(r *bufio.Reader) bool {
	n := r.Buffered()
	if n < 4 {
		return false
	}
	hdr, err := r.Peek(4)
	if err != nil {
		return false
	}
	return uint64(n-4) >= uint64(binary.BigEndian.Uint32(hdr))
}

// ReadFrameReserving is ReadFrame for a reader that accounts for the memory
// of frames in flight: reserve (if not nil) is called with the length of a
// frame larger than an eagerly read one before its body is read, and its
// error ends the read; the body is then read into a buffer of exactly that
// length. It returns how much was reserved, for the caller to release once
// done with the frame (also on error).
func ReadFrameReserving(r *bufio.Reader, reserve func(n int) error) (body []byte, reserved int, err error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, 0, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > MaxFrame {
		return nil, 0, fmt.Errorf("%w: %d bytes (limit %d)", ErrFrameTooLarge, n, MaxFrame)
	}
	if n == 0 {
		return nil, 0, errors.New("empty frame")
	}
	if n > eagerFrame && reserve != nil {
		if err := reserve(int(n)); err != nil {
			return nil, 0, err
		}
		reserved = int(n)
	}
	if n <= eagerFrame || reserve != nil {
		buf := make([]byte, n)
		if _, err := io.ReadFull(r, buf); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, reserved, err
		}
		return buf, reserved, nil
	}
	// A large frame's buffer grows with the bytes that actually arrive, so a
	// peer that announces a megabyte and sends nothing costs nothing.
	var b bytes.Buffer
	b.Grow(eagerFrame)
	if _, err := io.CopyN(&b, r, int64(n)); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, 0, err
	}
	return b.Bytes(), 0, nil
}

// eagerFrame: frames up to this size are read into a buffer allocated up
// front; larger ones into one that grows as they arrive.
const eagerFrame = 64 << 10

// AppendFrame appends v as one frame to dst.
func AppendFrame(dst []byte, v any) ([]byte, error) {
	start := len(dst)
	out, err := mp.Append(append(dst, 0, 0, 0, 0), v)
	if err != nil {
		return dst, err
	}
	n := len(out) - start - 4
	if n > MaxFrame {
		return dst, fmt.Errorf("%w: %d bytes (limit %d)", ErrFrameTooLarge, n, MaxFrame)
	}
	binary.BigEndian.PutUint32(out[start:], uint32(n))
	return out, nil
}

// A FrameBuf is a reusable buffer for one outgoing frame: Encode a value
// into it, hand the frame to a FrameWriter (whose Write copies it), then
// Free it. Every call and every reply is a frame: reusing their buffers
// takes an allocation the size of the frame off each.
type FrameBuf struct{ b []byte }

var frameBufs = sync.Pool{New: func() any { return new(FrameBuf) }}

// GetFrameBuf returns a buffer from the pool.
func GetFrameBuf() *FrameBuf { return frameBufs.Get().(*FrameBuf) }

// Encode encodes v as one frame (see AppendFrame) into the buffer, in
// place of what it held. The frame is valid until the next Encode or Free.
func (f *FrameBuf) Encode(v any) ([]byte, error) {
	out, err := AppendFrame(f.b[:0], v)
	if err != nil {
		return nil, err
	}
	f.b = out
	return out, nil
}

// Free returns the buffer to the pool; one that grew past maxKeptBuffer
// (a large reply) is left to the collector instead.
func (f *FrameBuf) Free() {
	if cap(f.b) > maxKeptBuffer {
		f.b = nil
	}
	frameBufs.Put(f)
}

// unmarshal decodes untrusted bytes. checkShape runs first, so a
// message's nesting and claimed sizes are bounded before the decoder
// allocates for them; the decoder is one of internal/mp's, pooled only for
// small inputs (msgpack.Unmarshal's pooled decoders keep the buffers a
// hostile length prefix made them grow, and its pool then held gigabytes:
// found by fuzzing).
func unmarshal(b []byte, v any) error {
	if err := checkShape(b); err != nil {
		return err
	}
	return mp.Decode(b, v)
}

// DecodeRequest parses a frame body into a Request.
func DecodeRequest(b []byte) (*Request, error) {
	var r Request
	if err := unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("decode request: %w", err)
	}
	return &r, nil
}

// DecodeResponse parses a frame body into a Response.
func DecodeResponse(b []byte) (*Response, error) {
	var r Response
	if err := unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("decode response: %w", err)
	}
	return &r, nil
}

// Unmarshal decodes a call's body.
func Unmarshal(b []byte, v any) error { return unmarshal(b, v) }

// Marshal encodes a call's body.
func Marshal(v any) ([]byte, error) { return mp.Append(nil, v) }
