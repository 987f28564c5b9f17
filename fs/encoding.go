package fs

import (
	"bytes"
	"errors"

	"github.com/chubby-dev/chubby/internal/mp"
	"github.com/vmihailenco/msgpack/v5"
)

// flatCommand is a Command as the log stores it: one msgpack map whose keys
// are the envelope's and the body's fields, each left out when zero. It is
// the encoding of the builds before the envelope, kept key for key (and in
// the same order) so that data directories they wrote replay unchanged. A
// key may carry different body fields in different ops: "p" is the node's
// path, or RemoveServer's server id; "g" is SetContents' ContentGen or
// Release's LockGen. Decoding accepts keys the op does not use (the old
// build did) and drops them.
type flatCommand struct {
	Op  Op    `msgpack:"o"`
	Now int64 `msgpack:"t"`

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
	Secret    []byte     `msgpack:"sk,omitempty"`
	Principal string     `msgpack:"pr,omitempty"`
	NoCache   bool       `msgpack:"ncache,omitempty"`
	// Since ACLs: the caller, and the ACL names of Create and SetACL
	// (InitACLs' admins in Names). Builds before them never wrote these
	// keys, so their commands decode with no caller: unchecked, as then.
	Caller string   `msgpack:"cl,omitempty"`
	Admin  bool     `msgpack:"adm,omitempty"`
	ACL    *ACL     `msgpack:"acl,omitempty"`
	Names  []string `msgpack:"nm,omitempty"`
}

// flatten lays c out in the log's key space.
func (c *Command) flatten() *flatCommand {
	f := &flatCommand{Op: c.Op, Now: c.Now, Session: c.Session, CallID: c.CallID, Acked: c.Acked, Caller: c.Caller, Admin: c.Admin}
	acl := func(a ACL) *ACL {
		if a.IsZero() {
			return nil
		}
		return &a
	}
	switch b := c.Body.(type) {
	case *CreateSession:
		f.TTL, f.Nonce, f.Secret, f.Principal, f.NoCache = b.TTL, b.Nonce, b.Secret, b.Principal, b.NoCache
	case *EndSession:
		f.Expired = b.Expired
	case *Create:
		f.Path, f.IsDir, f.Ephemeral, f.Exclusive, f.Data, f.Seq, f.ACL = b.Path, b.IsDir, b.Ephemeral, b.Exclusive, b.Data, b.Seq, acl(b.ACL)
	case *SetContents:
		f.Path, f.Instance, f.Data, f.Create, f.CAS, f.Gen, f.Seq = b.Path, b.Instance, b.Data, b.Create, b.CAS, b.ContentGen, b.Seq
	case *Delete:
		f.Path, f.Instance, f.Seq = b.Path, b.Instance, b.Seq
	case *Acquire:
		f.Path, f.Instance, f.Mode, f.Wait, f.WaitID, f.LockDelay = b.Path, b.Instance, b.Mode, b.Wait, b.WaitID, b.LockDelay
	case *CancelWait:
		f.Path, f.WaitID = b.Path, b.WaitID
	case *Release:
		f.Path, f.Gen = b.Path, b.LockGen
	case *GrantDelayed:
		f.Path = b.Path
	case *RemoveServer:
		f.Path = b.ServerID
	case *SetACL:
		f.Path, f.Instance, f.ACL = b.Path, b.Instance, acl(b.ACL)
	case *InitACLs:
		f.Names = b.Admins
	}
	return f
}

// command reads the envelope and the op's body out of f; nil for an
// unknown op.
func (f *flatCommand) command() *Command {
	var b Body
	var acl ACL
	if f.ACL != nil {
		acl = *f.ACL
	}
	switch f.Op {
	case OpNewEpoch:
		b = &NewEpoch{}
	case OpCreateSession:
		b = &CreateSession{TTL: f.TTL, Nonce: f.Nonce, Secret: f.Secret, Principal: f.Principal, NoCache: f.NoCache}
	case OpEndSession:
		b = &EndSession{Expired: f.Expired}
	case OpCreate:
		b = &Create{Path: f.Path, IsDir: f.IsDir, Ephemeral: f.Ephemeral, Exclusive: f.Exclusive, Data: f.Data, Seq: f.Seq, ACL: acl}
	case OpSetContents:
		b = &SetContents{Path: f.Path, Instance: f.Instance, Data: f.Data, Create: f.Create, CAS: f.CAS, ContentGen: f.Gen, Seq: f.Seq}
	case OpDelete:
		b = &Delete{Path: f.Path, Instance: f.Instance, Seq: f.Seq}
	case OpAcquire:
		b = &Acquire{Path: f.Path, Instance: f.Instance, Mode: f.Mode, Wait: f.Wait, WaitID: f.WaitID, LockDelay: f.LockDelay}
	case OpCancelWait:
		b = &CancelWait{Path: f.Path, WaitID: f.WaitID}
	case OpRelease:
		b = &Release{Path: f.Path, LockGen: f.Gen}
	case OpGrantDelayed:
		b = &GrantDelayed{Path: f.Path}
	case OpRemoveServer:
		b = &RemoveServer{ServerID: f.Path}
	case OpSetACL:
		b = &SetACL{Path: f.Path, Instance: f.Instance, ACL: acl}
	case OpInitACLs:
		b = &InitACLs{Admins: f.Names}
	default:
		return nil
	}
	return &Command{Op: f.Op, Now: f.Now, Session: f.Session, CallID: f.CallID, Acked: f.Acked, Caller: f.Caller, Admin: f.Admin, Body: b}
}

// Encode returns the log entry bytes for c. It refuses a command Apply
// would reject (an unknown op, a body of another op).
func (c *Command) Encode() ([]byte, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	return mp.Append(nil, c.flatten())
}

// DecodeCommand parses a log entry. It rejects trailing garbage and unknown ops.
func DecodeCommand(b []byte) (*Command, error) {
	var f plainFlatCommand
	rd := bytes.NewReader(b)
	if err := msgpack.NewDecoder(rd).Decode(&f); err != nil {
		return nil, errf(ErrBadRequest, "decode command: %v", err)
	}
	if rd.Len() > 0 {
		return nil, errf(ErrBadRequest, "decode command: %d bytes of trailing garbage", rd.Len())
	}
	c := (*flatCommand)(&f).command()
	if c == nil {
		return nil, errf(ErrBadRequest, "unknown command op %d", f.Op)
	}
	return c, nil
}

// DecodeCommands parses a log entry that holds one or more commands encoded
// back to back (the master batches concurrent commands into one entry).
// Every replica decodes every entry, so it reads them with flatCommand's
// hand-written decoder; an entry that fails there is read again by the
// reflective decoder of the builds before it, so that whatever an entry
// holds, it decodes (or fails, with the same error) as it did then.
func DecodeCommands(b []byte) ([]*Command, error) {
	var out []*Command
	err := mp.DecodeEach(b, func(d *msgpack.Decoder) error {
		var f flatCommand
		if err := f.DecodeMsgpack(d); err != nil {
			return err
		}
		c := f.command()
		if c == nil {
			return errUnknownOp
		}
		out = append(out, c)
		return nil
	})
	if err != nil || len(out) == 0 {
		return decodeCommandsReflective(b)
	}
	return out, nil
}

var errUnknownOp = errors.New("unknown op")

// decodeCommandsReflective is DecodeCommands by msgpack's reflective
// decoder, as the builds before the hand-written one decoded entries.
func decodeCommandsReflective(b []byte) ([]*Command, error) {
	rd := bytes.NewReader(b)
	dec := msgpack.NewDecoder(rd)
	var out []*Command
	for rd.Len() > 0 {
		var f plainFlatCommand
		if err := dec.Decode(&f); err != nil {
			return nil, errf(ErrBadRequest, "decode command %d of batch: %v", len(out), err)
		}
		c := (*flatCommand)(&f).command()
		if c == nil {
			return nil, errf(ErrBadRequest, "command %d of batch: unknown op %d", len(out), f.Op)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errf(ErrBadRequest, "empty command batch")
	}
	return out, nil
}

// plainFlatCommand is flatCommand without its methods: msgpack decodes it
// by reflection.
type plainFlatCommand flatCommand
