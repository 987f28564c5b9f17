package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/chubby-dev/chubby/client"
)

// cmdWatch prints the events of PATH (and of its children, for a directory)
// as they arrive, until -for DUR has passed or Ctrl-C; with -json one object
// per event. Session events (jeopardy, safe, expired, master_failover) are
// printed too: they say whether the stream can be trusted.
func (sh *shell) cmdWatch(a *cmdArgs) error {
	var limit <-chan time.Time
	if a.has("for") {
		d, err := time.ParseDuration(a.flags["for"])
		if err != nil || d <= 0 {
			return &usageError{fmt.Sprintf("-for %q: a positive duration", a.flags["for"])}
		}
		t := time.NewTimer(d)
		defer t.Stop()
		limit = t.C
	}
	path := a.pos[0]
	ctx, cancel := sh.ctx()
	defer cancel()
	events := sh.watchEvents()
	defer sh.stopWatch()
	h, err := sh.cli.Open(ctx, path, client.WithEvents())
	if err != nil {
		return err
	}
	defer h.Close()
	for {
		select {
		case ev := <-events:
			if !sh.watched(path, ev) {
				continue
			}
			obj := map[string]any{"event": string(ev.Type), "path": ev.Path}
			if ev.Path == "" {
				obj["path"] = path
			}
			sh.out(obj, fmt.Sprintf("%s %-17s %s", ev.Time.Format("15:04:05.000"), ev.Type, obj["path"]))
			if ev.Type == client.EventExpired {
				return fmt.Errorf("%w: the session ended while watching", client.ErrSessionExpired)
			}
		case <-limit:
			return nil
		case <-ctx.Done():
			return nil // Ctrl-C ends a watch normally
		case <-sh.cli.Done():
			return errors.Join(client.ErrSessionExpired, errors.New("the session ended while watching"))
		}
	}
}

// watched reports whether ev concerns the watched path: an event of the node
// itself, of one of its children, or of the session.
func (sh *shell) watched(path string, ev client.Event) bool {
	switch ev.Type {
	case client.EventJeopardy, client.EventSafe, client.EventExpired, client.EventMasterFailover:
		return true
	}
	if ev.Path == path {
		return true
	}
	i := strings.LastIndexByte(ev.Path, '/')
	return i >= 0 && ev.Path[:i] == path
}

// watchEvents is where a watch reads events: the client's own channel, or,
// in the interactive shell (whose pump owns that channel), what the pump
// forwards.
func (sh *shell) watchEvents() <-chan client.Event {
	if sh.forward == nil {
		return sh.cli.Events()
	}
	ch := make(chan client.Event, 256)
	sh.forward.Store(&ch)
	return ch
}

func (sh *shell) stopWatch() {
	if sh.forward != nil {
		sh.forward.Store(nil)
	}
}
