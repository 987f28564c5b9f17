package client

// Calls: numbering the state-changing calls, the acknowledged mark, and
// retrying through connection loss and failover (exactly once for numbered
// calls: the master answers a retry with the first result).

import (
	"context"
	"errors"

	"github.com/chubby-dev/chubby/wire"
)

// retryable: the call was refused before it was applied (or the connection
// failed) and may be retried on the master once found.
func retryable(err error) bool {
	return errors.Is(err, wire.ErrNotMaster) || errors.Is(err, wire.ErrWrongEpoch) || errors.Is(err, errConnLost)
}

// beginCall numbers a mutating call; endCall marks its reply received.
// The acknowledged mark sent with each call is the lowest number still
// waiting for a reply: the master may forget every result below it.
func (c *Client) beginCall() uint64 {
	c.callMu.Lock()
	defer c.callMu.Unlock()
	c.nextCall++
	c.inflight[c.nextCall] = struct{}{}
	return c.nextCall
}

func (c *Client) endCall(id uint64) {
	c.callMu.Lock()
	delete(c.inflight, id)
	c.callMu.Unlock()
}

func (c *Client) acked() uint64 {
	c.callMu.Lock()
	defer c.callMu.Unlock()
	low := c.nextCall + 1
	for id := range c.inflight {
		if id < low {
			low = id
		}
	}
	return low
}

// Call kinds for do.
const (
	readCall     = false // no state change: safe to repeat
	numberedCall = true  // a state change, deduplicated by its call number
)

// do runs a call on the master and retries it through connection loss and
// failover until it is answered, ctx ends or the session expires. A
// numbered call keeps its number across retries, so the master applies it
// at most once and answers a retry with the first result.
func (c *Client) do(ctx context.Context, m wire.Method, args, reply any, numbered bool) error {
	var callID uint64
	if numbered {
		callID = c.beginCall()
		defer c.endCall(callID)
	}
	retry := c.newRetrier()
	for {
		conn, epoch, err := c.current(ctx)
		if err != nil {
			return err
		}
		var acked uint64
		if numbered {
			acked = c.acked()
		}
		err = conn.callNumbered(ctx, m, epoch, c.session(), callID, acked, args, reply)
		unavailable := errors.Is(err, ErrUnavailable) // e.g. the master shutting down mid-apply
		if err == nil || !(retryable(err) || unavailable) {
			if errors.Is(err, ErrSessionExpired) {
				c.expire()
			}
			return err
		}
		c.dropConn(conn)
		if unavailable {
			t := c.clock.NewTimer(retry.next())
			select {
			case <-t.C():
			case <-ctx.Done():
				t.Stop()
				return err
			}
		}
	}
}
