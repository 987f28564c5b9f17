package wire

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/chubby-dev/chubby/fs"
)

func frame(b []byte) []byte {
	out := binary.BigEndian.AppendUint32(nil, uint32(len(b)))
	return append(out, b...)
}

func seedRequests(f *testing.F) {
	for _, b := range seedStreams(f) {
		f.Add(b)
	}
}

// seedStreams are the seed inputs of the frame fuzz targets: a frame of
// each call, an empty stream, absurd and broken frames, an HTTP request.
func seedStreams(f *testing.F) [][]byte {
	var out [][]byte
	for m := MHello; m < MethodCount; m++ {
		body, _ := Marshal(SetContentsArgs{Path: "/ls/local/x", Data: []byte("v"), Seq: &fs.Sequencer{Path: "/ls/local/l", Mode: fs.Exclusive, Gen: 7}})
		b, err := AppendFrame(nil, &Request{ID: uint64(m), Method: m, Epoch: 3, Session: 9, Call: 2, Acked: 1, Body: body})
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, b)
	}
	return append(out, []byte{}, []byte{0xff, 0xff, 0xff, 0xff}, frame([]byte{0xc1}), []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
}

// FuzzReadFrame: any byte stream yields frames no larger than MaxFrame, or
// an error; never a panic or an allocation past the limit.
func FuzzReadFrame(f *testing.F) {
	seedRequests(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bufio.NewReader(bytes.NewReader(b))
		for i := 0; i < 16; i++ {
			fr, err := ReadFrame(r)
			if err != nil {
				return
			}
			if len(fr) == 0 || len(fr) > MaxFrame {
				t.Fatalf("frame of %d bytes", len(fr))
			}
			DecodeRequest(fr)
			DecodeResponse(fr)
		}
	})
}

// argsFor returns a fresh argument value for a method, as the server's
// dispatch table decodes it.
func argsFor(m Method) any {
	switch m {
	case MHello:
		return &HelloArgs{}
	case MCreateSession:
		return &CreateSessionArgs{}
	case MKeepAlive:
		return &KeepAliveArgs{}
	case MKeepAliveMany:
		return &KeepAliveManyArgs{}
	case MOpen:
		return &OpenArgs{}
	case MGetContents, MGetStat, MReadDir, MSequencer:
		return &NodeArgs{}
	case MSetContents:
		return &SetContentsArgs{}
	case MDelete:
		return &DeleteArgs{}
	case MAcquire:
		return &AcquireArgs{}
	case MCancelAcquire:
		return &CancelAcquireArgs{}
	case MRelease:
		return &ReleaseArgs{}
	case MCheckSequencer:
		return &CheckSequencerArgs{}
	case MRemoveServer:
		return &RemoveServerArgs{}
	case MUnwatch:
		return &UnwatchArgs{}
	}
	return &Empty{}
}

// FuzzDecodeCall: a frame body decodes into a request envelope and its
// method's arguments, or fails with an error; re-encoding a decoded request
// and decoding it again gives the same envelope.
func FuzzDecodeCall(f *testing.F) {
	seedRequests(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) >= 4 {
			b = b[4:]
		}
		req, err := DecodeRequest(b)
		if err != nil {
			return
		}
		Unmarshal(req.Body, argsFor(req.Method))
		again, err := AppendFrame(nil, req)
		if err != nil {
			return // an envelope over the frame limit
		}
		req2, err := DecodeRequest(again[4:])
		if err != nil {
			t.Fatalf("re-encoded request does not decode: %v", err)
		}
		if req2.ID != req.ID || req2.Method != req.Method || req2.Epoch != req.Epoch || req2.Session != req.Session ||
			req2.Call != req.Call || req2.Acked != req.Acked || !bytes.Equal(req2.Body, req.Body) {
			t.Fatalf("round trip changed the request: %+v → %+v", req, req2)
		}
	})
}
