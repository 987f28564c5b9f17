package wire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"
)

// chunkReader hands out its data a few bytes at a time — 1 to 7 bytes a
// Read, sizes chosen by the fuzzer — so a frame's header and body arrive
// split at arbitrary points, as a slow or hostile peer sends them.
type chunkReader struct {
	data, sizes []byte
	i           int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := 1
	if len(c.sizes) > 0 {
		n = int(c.sizes[c.i%len(c.sizes)])%7 + 1
		c.i++
	}
	n = min(n, len(p), len(c.data))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// frameRead is what reading a stream frame by frame gave: the frames, and
// the error that ended the reading (nil if maxFrames were read).
type frameRead struct {
	frames [][]byte
	err    error
}

const maxFrames = 16

// readFrames reads up to maxFrames frames from r with the memory
// accounting the server uses, checking it: a frame is reserved for iff it
// is larger than an eagerly read one, by exactly its length.
func readFrames(t *testing.T, r *bufio.Reader) frameRead {
	var out frameRead
	for range maxFrames {
		asked := 0
		b, reserved, err := ReadFrameReserving(r, func(n int) error {
			if n <= eagerFrame || n > MaxFrame {
				t.Fatalf("reserve(%d): outside (%d, %d]", n, eagerFrame, MaxFrame)
			}
			asked = n
			return nil
		})
		if reserved != asked {
			t.Fatalf("ReadFrameReserving reports %d reserved, reserve was asked for %d", reserved, asked)
		}
		if err != nil {
			out.err = err
			return out
		}
		if len(b) == 0 || len(b) > MaxFrame || (asked != 0 && asked != len(b)) {
			t.Fatalf("frame of %d bytes (%d reserved)", len(b), asked)
		}
		out.frames = append(out.frames, b)
	}
	return out
}

// FuzzReadFramePartial: a byte stream read through a reader that returns a
// few bytes at a time (a small bufio buffer, so frames straddle its
// refills) gives the same frames and the same error as the stream read
// whole; a truncated stream gives a prefix of those frames and then an
// error, never a frame made of what was cut; every frame is within
// MaxFrame, and the reservation for it is exactly its length. Each frame
// also goes through the decoders, whose shape check must refuse a nesting
// deeper than MaxDepth.
func FuzzReadFramePartial(f *testing.F) {
	for i, b := range seedStreams(f) {
		f.Add(b, []byte{byte(i)}, uint32(len(b)/2))
	}
	for _, b := range []struct {
		stream []byte
		sizes  []byte
		cut    uint32
	}{
		{frame(append(bytes.Repeat([]byte{0x91}, 40), 0xc0)), []byte{0, 3, 6}, 20},
		{frame(append(bytes.Repeat([]byte{0x81, 0x01}, 40), 0xc0)), []byte{1}, 7},
		{frame(append(bytes.Repeat([]byte{0xdc, 0x00, 0x01}, 100), 0xc0)), []byte{5, 2}, 300},
		{append(frame([]byte{0x80}), frame(make([]byte, eagerFrame+1))...), []byte{6}, eagerFrame},
		{frame(bytes.Repeat([]byte{0x91}, 5000)), []byte{2}, 0},
		{bytes.Join(seedStreams(f)[:6], nil), []byte{3, 1, 4, 1, 5, 9, 2, 6}, 100},
	} {
		f.Add(b.stream, b.sizes, b.cut)
	}
	f.Fuzz(func(t *testing.T, stream, sizes []byte, cut uint32) {
		whole := readFrames(t, bufio.NewReader(bytes.NewReader(stream)))
		parts := readFrames(t, bufio.NewReaderSize(&chunkReader{data: stream, sizes: sizes}, 16))
		if errString(whole.err) != errString(parts.err) || len(whole.frames) != len(parts.frames) {
			t.Fatalf("whole: %d frames, %v; in pieces: %d frames, %v", len(whole.frames), whole.err, len(parts.frames), parts.err)
		}
		for i := range whole.frames {
			if !bytes.Equal(whole.frames[i], parts.frames[i]) {
				t.Fatalf("frame %d differs when read in pieces", i)
			}
		}

		if len(stream) > 0 {
			short := stream[:int(cut)%len(stream)]
			got := readFrames(t, bufio.NewReaderSize(&chunkReader{data: short, sizes: sizes}, 16))
			if len(got.frames) > len(whole.frames) {
				t.Fatalf("a truncated stream gave %d frames, the whole one %d", len(got.frames), len(whole.frames))
			}
			for i := range got.frames {
				if !bytes.Equal(got.frames[i], whole.frames[i]) {
					t.Fatalf("frame %d of a truncated stream differs", i)
				}
			}
			if got.err == nil && len(got.frames) < maxFrames {
				t.Fatalf("a truncated stream ended without an error")
			}
			if n := len(got.frames); n < len(whole.frames) && got.err != nil && !isShortRead(got.err) && errString(got.err) != errString(readErrAt(whole, n)) {
				t.Fatalf("truncated stream: frame %d failed with %v", n, got.err)
			}
		}

		for _, fr := range whole.frames {
			decodeChecked(t, fr)
		}
	})
}

// FuzzDecodeNested: a body of containers nested depth deep (each kind of
// array and map header, chosen by the fuzzer) around any tail decodes
// without panic, and one nested deeper than MaxDepth is refused as
// malformed before the decoder allocates for it.
func FuzzDecodeNested(f *testing.F) {
	f.Add(uint32(MaxDepth), []byte{0}, []byte{0xc0})
	f.Add(uint32(MaxDepth+1), []byte{0, 1, 2, 3, 4}, []byte{0xc0})
	f.Add(uint32(1_000_000), []byte{0}, []byte{0xc0})
	f.Add(uint32(200_000), []byte{4, 1}, []byte{})
	f.Add(uint32(3), []byte{2}, []byte{0xa1, 'x'})
	f.Fuzz(func(t *testing.T, depth uint32, kinds, tail []byte) {
		if len(kinds) == 0 {
			kinds = []byte{0}
		}
		var body []byte
		for i := 0; uint32(i) < depth && len(body) < MaxFrame; i++ {
			switch kinds[i%len(kinds)] % 6 {
			case 0:
				body = append(body, 0x91) // fixarray of 1
			case 1:
				body = append(body, 0xdc, 0, 1) // array16 of 1
			case 2:
				body = append(body, 0xdd, 0, 0, 0, 1) // array32 of 1
			case 3:
				body = append(body, 0x81, 0x01) // fixmap of 1, key 1
			case 4:
				body = append(body, 0xde, 0, 1, 0xa1, 'k') // map16 of 1, key "k"
			case 5:
				body = append(body, 0xdf, 0, 0, 0, 1, 0xc0) // map32 of 1, key nil
			}
		}
		body = append(body, tail...)
		var v any
		err := Unmarshal(body, &v)
		deeper := nesting(body) > MaxDepth
		if deeper && !errors.Is(err, ErrMalformed) {
			t.Fatalf("a body nested %d deep: %v, want ErrMalformed", nesting(body), err)
		}
		decodeChecked(t, body)
	})
}

// nesting is how deep the leading containers of b nest: the headers this
// file's fuzz targets build, counted without the decoder under test.
func nesting(b []byte) int {
	d := 0
	for len(b) > 0 {
		switch {
		case b[0] == 0x91:
			b = b[1:]
		case len(b) >= 3 && b[0] == 0xdc && b[1] == 0 && b[2] == 1:
			b = b[3:]
		case len(b) >= 5 && b[0] == 0xdd && bytes.Equal(b[1:5], []byte{0, 0, 0, 1}):
			b = b[5:]
		case len(b) >= 2 && b[0] == 0x81 && b[1] == 0x01:
			b = b[2:]
		case len(b) >= 5 && b[0] == 0xde && bytes.Equal(b[1:5], []byte{0, 1, 0xa1, 'k'}):
			b = b[5:]
		case len(b) >= 6 && b[0] == 0xdf && bytes.Equal(b[1:6], []byte{0, 0, 0, 1, 0xc0}):
			b = b[6:]
		default:
			return d
		}
		d++
	}
	return d
}

// decodeChecked decodes b as a request and a response; whatever the
// outcome, a body that passed must nest no deeper than MaxDepth.
func decodeChecked(t *testing.T, b []byte) {
	t.Helper()
	if _, err := DecodeRequest(b); err == nil && nesting(b) > MaxDepth {
		t.Fatalf("a request nested %d deep decoded", nesting(b))
	}
	if _, err := DecodeResponse(b); err == nil && nesting(b) > MaxDepth {
		t.Fatalf("a response nested %d deep decoded", nesting(b))
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// isShortRead: the stream ended inside a frame or between frames.
func isShortRead(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// readErrAt is the error reading frame n of r gave (nil if it was read).
func readErrAt(r frameRead, n int) error {
	if n < len(r.frames) {
		return nil
	}
	return r.err
}
