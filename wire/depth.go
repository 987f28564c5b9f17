package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// MaxDepth is the deepest nesting of arrays and maps a message may have.
// The protocol's own messages nest five deep at most; a hostile frame of a
// million nested arrays in 1 MiB would otherwise cost the decoder hundreds
// of megabytes.
const MaxDepth = 32

// ErrMalformed is returned for a message nested deeper than MaxDepth, one
// whose strings, arrays or maps claim more than its bytes hold, one with
// trailing bytes, or one using the reserved byte 0xc1.
var ErrMalformed = errors.New("malformed message")

// checkShape walks one msgpack value in b without decoding it and without
// allocating: it fails if the value nests deeper than MaxDepth, claims more
// elements or bytes than b holds, uses the reserved byte 0xc1, or is
// followed by trailing bytes. Decoding runs only on what passes, so its
// cost is bounded by the frame's size.
func checkShape(b []byte) error {
	var stack [MaxDepth + 1]uint64 // elements left in each open container
	depth := 0
	stack[0] = 1 // one top-level value
	pos := 0
	need := func(n uint64) error {
		if uint64(len(b)-pos) < n {
			return fmt.Errorf("%w: %d bytes claimed at offset %d, %d left", ErrMalformed, n, pos, len(b)-pos)
		}
		return nil
	}
	uintN := func(size int) (uint64, error) {
		if err := need(uint64(size)); err != nil {
			return 0, err
		}
		var v uint64
		switch size {
		case 1:
			v = uint64(b[pos])
		case 2:
			v = uint64(binary.BigEndian.Uint16(b[pos:]))
		case 4:
			v = uint64(binary.BigEndian.Uint32(b[pos:]))
		}
		pos += size
		return v, nil
	}
	for depth >= 0 {
		if stack[depth] == 0 { // this container is complete
			depth--
			continue
		}
		stack[depth]--
		if err := need(1); err != nil {
			return err
		}
		c := b[pos]
		pos++
		var skip, items uint64 // bytes to skip; elements of a container
		container := false
		var err error
		switch {
		case c <= 0x7f, c >= 0xe0, c == 0xc0, c == 0xc2, c == 0xc3: // fixints, nil, bools
		case c >= 0x80 && c <= 0x8f: // fixmap
			items, container = 2*uint64(c&0x0f), true
		case c >= 0x90 && c <= 0x9f: // fixarray
			items, container = uint64(c&0x0f), true
		case c >= 0xa0 && c <= 0xbf: // fixstr
			skip = uint64(c & 0x1f)
		case c == 0xc4 || c == 0xd9: // bin8, str8
			skip, err = uintN(1)
		case c == 0xc5 || c == 0xda: // bin16, str16
			skip, err = uintN(2)
		case c == 0xc6 || c == 0xdb: // bin32, str32
			skip, err = uintN(4)
		case c == 0xc7: // ext8
			skip, err = uintN(1)
			skip++
		case c == 0xc8: // ext16
			skip, err = uintN(2)
			skip++
		case c == 0xc9: // ext32
			skip, err = uintN(4)
			skip++
		case c == 0xca, c == 0xce, c == 0xd2: // float32, uint32, int32
			skip = 4
		case c == 0xcb, c == 0xcf, c == 0xd3: // float64, uint64, int64
			skip = 8
		case c == 0xcc, c == 0xd0: // uint8, int8
			skip = 1
		case c == 0xcd, c == 0xd1: // uint16, int16
			skip = 2
		case c >= 0xd4 && c <= 0xd8: // fixext 1, 2, 4, 8, 16
			skip = 1 + 1<<(c-0xd4)
		case c == 0xdc: // array16
			items, err = uintN(2)
			container = true
		case c == 0xdd: // array32
			items, err = uintN(4)
			container = true
		case c == 0xde: // map16
			items, err = uintN(2)
			items, container = 2*items, true
		case c == 0xdf: // map32
			items, err = uintN(4)
			items, container = 2*items, true
		default: // 0xc1
			return fmt.Errorf("%w: reserved byte 0x%x at offset %d", ErrMalformed, c, pos-1)
		}
		if err != nil {
			return err
		}
		if err := need(skip); err != nil {
			return err
		}
		pos += int(skip)
		if container && items > 0 {
			if err := need(items); err != nil { // every element takes a byte at least
				return err
			}
			if depth+1 > MaxDepth {
				return fmt.Errorf("%w: nested deeper than %d at offset %d", ErrMalformed, MaxDepth, pos)
			}
			depth++
			stack[depth] = items
		}
	}
	if pos != len(b) {
		return fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(b)-pos)
	}
	return nil
}
