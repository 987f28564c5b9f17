package server

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/chubby-dev/chubby/fs"
)

// The status page (issue 15): server-rendered HTML at / and one page per
// node under /ls/, refreshed in place by a few lines of JavaScript. Every
// list is bounded so a page costs the same however large the cell: one pass
// over the nodes under the state's read lock (as /status), one pass over
// the leases, and a /status request to each other server (they answer from
// memory; pagePeerTimeout bounds a slow or dead one).

//go:embed statuspage.html
var statusPageHTML string

var pageTemplates = template.Must(template.New("page").Parse(statusPageHTML))

// Bounds of what a page lists.
const (
	pageTopLocks    = 10  // most contended locks, lock-delays in force
	pageMaxWaiters  = 10  // waiters shown per lock
	pageMaxWrites   = 10  // writes waiting on invalidations
	pageMaxEvents   = 30  // recent events
	pageMaxChildren = 200 // children on a node page
	pagePeerTimeout = 500 * time.Millisecond
	// pageRefresh is how often the page reloads its data.
	pageRefresh = 2 * time.Second
)

// pageHeader is what both pages show at the top.
type pageHeader struct {
	Title      string
	Cell       string
	Node       string
	Role       string // this server's raft role
	IsMaster   bool
	Master     string // the master's name, "" if none known
	MasterLink string // its status page, "" if unknown or this server
	Epoch      uint64
	Updated    string
	RefreshMS  int64
}

// statusPage is the data of /.
type statusPage struct {
	pageHeader
	Members     []memberRow
	MembersNote string

	SessionsTotal  int // in the replicated state
	LeaseStates    *leaseStates
	KeepAliveRate  string
	LeaseUsed      histRow
	UrgentKA       uint64
	Created        uint64
	Expired        uint64
	Nodes          int
	Locks          fs.LockSummary
	LockDelayBlock uint64
	LockWait       histRow
	Contended      []lockRow
	Delays         []lockRow
	WritesWaiting  int
	Writes         []writeRow
	InvalWait      histRow
	Commit         histRow
	Fsync          histRow
	Failover       histRow
	LeaderChanges  uint64
	Applied        uint64
	CommitIndex    uint64
	Term           uint64
	Denied         []deniedRow
	Events         []eventRow
}

// memberRow is one server of the cell as this server sees it.
type memberRow struct {
	Name        string
	Link        string // its status page
	RPCAddr     string
	Voter       bool
	Self        bool
	Role        string // leader, follower, candidate, unknown
	Health      string // up, lagging, down, unknown
	Why         string
	LastContact string
	Lag         string
	Gossip      string
}

type histRow struct {
	Count         uint64
	P50, P99, Max string
}

type lockRow struct {
	Path        string
	Mode        string
	Gen         uint64
	Holders     []string
	Waiters     []string
	MoreWaiters int
	NWaiters    int
	LongestWait string
	DelayLeft   string
}

type writeRow struct {
	Paths    string
	Waiting  string
	Sessions int
}

type deniedRow struct {
	Reason string
	Count  uint64
}

type eventRow struct {
	At, Ago, Kind, Text string
}

// nodePage is the data of /ls/PATH.
type nodePage struct {
	pageHeader
	Path       string
	Crumbs     []crumb
	Error      string
	Stat       fs.Stat
	Kind       string
	Modified   string
	LockRows   []lockRow // the node's lock, one row
	LockHeld   bool
	Children   []crumb
	MoreChilds int
}

type crumb struct{ Name, Link string }

func (s *Server) serveStatusPage(w http.ResponseWriter, r *http.Request) {
	s.render(w, "status", s.statusPageData(r.Context()))
}

func (s *Server) serveNodePage(w http.ResponseWriter, r *http.Request) {
	s.render(w, "node", s.nodePageData(r.URL.Path))
}

func (s *Server) render(w http.ResponseWriter, name string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	var b strings.Builder
	if err := pageTemplates.ExecuteTemplate(&b, name, data); err != nil {
		http.Error(w, "status page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	fmt.Fprint(w, b.String())
}

func (s *Server) header(title string) pageHeader {
	h := pageHeader{Title: title, Cell: s.cfg.Cell, Node: s.cfg.NodeID, Role: strings.ToLower(s.raft.State().String()),
		Epoch: s.epoch.Load(), Updated: s.clock.Now().UTC().Format("15:04:05 UTC"), RefreshMS: pageRefresh.Milliseconds()}
	h.IsMaster = h.Epoch != 0
	if _, id := s.raft.LeaderWithID(); id != "" {
		h.Master = string(id)
		if h.Master != s.cfg.NodeID && s.members != nil {
			if info, ok := s.members.snapshot()[h.Master]; ok && info.HTTP != "" {
				h.MasterLink = s.httpScheme() + "://" + info.HTTP + "/"
			}
		}
	}
	return h
}

func (s *Server) statusPageData(ctx context.Context) *statusPage {
	now := s.clock.Now()
	p := &statusPage{pageHeader: s.header("chubby cell " + s.cfg.Cell)}
	self := s.Status()
	p.Applied, p.CommitIndex, p.Term = self.Applied, self.CommitIndex, self.Term
	p.Members, p.MembersNote = s.memberRows(ctx, self)

	s.fsm.read(func(st *fs.State) {
		p.SessionsTotal = st.SessionCount()
		p.Nodes = st.NodeCount()
		p.Locks = st.Locks(now.UnixNano(), pageTopLocks)
	})
	m := s.metrics
	if p.IsMaster {
		ls := s.leases.states(now)
		p.LeaseStates = &ls
		p.KeepAliveRate = fmt.Sprintf("%.1f/s", ls.KeepAliveRate)
	}
	p.LeaseUsed = ratioRow(summarize(m.leaseUsed))
	p.UrgentKA = counterValue(m.urgentKA)
	p.Created, p.Expired = counterValue(m.created), counterValue(m.expired)
	p.LockDelayBlock = counterValue(m.delayBlocks)
	p.LockWait = secondsRow(summarize(m.lockWait))
	p.InvalWait = secondsRow(summarize(m.invalWait))
	p.Commit = secondsRow(summarize(m.applyLatency))
	p.Fsync = secondsRow(summarize(m.logStore))
	p.Failover = secondsRow(summarize(m.failover))
	p.LeaderChanges = counterValue(m.leaderChanges)
	p.Contended = s.lockRows(now, p.Locks.Contended)
	p.Delays = s.lockRows(now, p.Locks.Delayed)

	n, writes := s.tracker.waitingWrites(pageMaxWrites)
	p.WritesWaiting = n
	for _, wr := range writes {
		paths := wr.Paths
		more := ""
		if len(paths) > 3 {
			paths, more = paths[:3], fmt.Sprintf(" and %d more", len(wr.Paths)-3)
		}
		p.Writes = append(p.Writes, writeRow{Paths: strings.Join(paths, ", ") + more,
			Waiting: fmtDur(now.Sub(wr.Since)), Sessions: wr.Sessions})
	}
	for _, d := range deniedCounts(m.denied) {
		if d.Count > 0 {
			p.Denied = append(p.Denied, d)
		}
	}
	for _, e := range s.journal.recent(pageMaxEvents) {
		p.Events = append(p.Events, eventRow{At: e.At.UTC().Format("15:04:05.000"), Ago: fmtDur(now.Sub(e.At)) + " ago", Kind: e.Kind, Text: e.Text})
	}
	return p
}

// lockRows turns locks into table rows: holders with their leases (on the
// master), the first waiters with how long they have waited here.
func (s *Server) lockRows(now time.Time, locks []fs.LockInfo) []lockRow {
	var ids []uint64
	var keys []waitKey
	for _, li := range locks {
		for _, h := range li.Holders {
			ids = append(ids, h.Session)
		}
		for _, w := range li.Waiters[:min(len(li.Waiters), pageMaxWaiters)] {
			keys = append(keys, waitKey{w.Session, w.WaitID})
		}
	}
	leases := s.leases.views(ids)
	since := s.waits.since(keys)
	rows := make([]lockRow, 0, len(locks))
	for _, li := range locks {
		rows = append(rows, s.lockRow(now, li, leases, since))
	}
	return rows
}

func (s *Server) lockRow(now time.Time, li fs.LockInfo, leases map[uint64]leaseView, since map[waitKey]time.Time) lockRow {
	row := lockRow{Path: li.Path, Gen: li.LockGen, NWaiters: len(li.Waiters)}
	if len(li.Holders) > 0 {
		row.Mode = li.Mode.String()
	} else {
		row.Mode = "free"
	}
	for _, h := range li.Holders {
		txt := fmt.Sprintf("session %d", h.Session)
		if l, ok := leases[h.Session]; ok {
			switch {
			case l.Ending:
				txt += " (lease over, expiring)"
			case l.Unflushed:
				txt += fmt.Sprintf(" (lease left %s, not heard from since the failover)", fmtDur(l.Expires.Sub(now)))
			case now.Sub(l.Renewed) > 2*l.TTL/3:
				txt += fmt.Sprintf(" (lease left %s, late: last KeepAlive %s ago)", fmtDur(l.Expires.Sub(now)), fmtDur(now.Sub(l.Renewed)))
			default:
				txt += fmt.Sprintf(" (lease left %s)", fmtDur(l.Expires.Sub(now)))
			}
		}
		row.Holders = append(row.Holders, txt)
	}
	var longest time.Duration
	for i, w := range li.Waiters {
		if i >= pageMaxWaiters {
			row.MoreWaiters = len(li.Waiters) - i
			break
		}
		txt := fmt.Sprintf("session %d, %s", w.Session, w.Mode)
		if t, ok := since[waitKey{w.Session, w.WaitID}]; ok {
			d := now.Sub(t)
			longest = max(longest, d)
			txt += ", waiting " + fmtDur(d)
		}
		row.Waiters = append(row.Waiters, txt)
	}
	if longest > 0 {
		row.LongestWait = fmtDur(longest)
	}
	if left := time.Duration(li.DelayUntil - now.UnixNano()); len(li.Holders) == 0 && left > 0 {
		row.DelayLeft = fmtDur(left)
	}
	return row
}

// peerStatus is what a server's /status said, or why it said nothing.
type peerStatus struct {
	st  Status
	err error
}

// fetchStatuses asks every server in addrs (name → HTTP address) for its
// /status at once, each within pagePeerTimeout.
func fetchStatuses(ctx context.Context, hc *http.Client, scheme string, addrs map[string]string) map[string]peerStatus {
	ctx, cancel := context.WithTimeout(ctx, pagePeerTimeout)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	out := map[string]peerStatus{}
	for name, addr := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ps := fetchStatus(ctx, hc, scheme, addr)
			mu.Lock()
			out[name] = ps
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

func fetchStatus(ctx context.Context, hc *http.Client, scheme, addr string) peerStatus {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+addr+"/status", nil)
	if err != nil {
		return peerStatus{err: err}
	}
	resp, err := hc.Do(req)
	if err != nil {
		var ue interface{ Unwrap() error }
		if errors.As(err, &ue) && ue.Unwrap() != nil {
			err = ue.Unwrap()
		}
		return peerStatus{err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return peerStatus{err: fmt.Errorf("/status answered %s", resp.Status)}
	}
	var ps peerStatus
	if err := json.NewDecoder(resp.Body).Decode(&ps.st); err != nil {
		return peerStatus{err: fmt.Errorf("/status: %v", err)}
	}
	return ps
}

// memberRows describes every server of the raft configuration (and any
// other server gossip knows of) with its role, health, last contact and log
// lag. A server is down when it does not answer its /status, when this
// master's heartbeats to it fail, or when gossip declared it dead.
func (s *Server) memberRows(ctx context.Context, self Status) ([]memberRow, string) {
	cf := s.raft.GetConfiguration()
	if err := s.awaitRaft(cf); err != nil {
		return nil, "raft configuration unavailable: " + err.Error()
	}
	var book map[string]memberInfo
	if s.members != nil {
		book = s.members.snapshot()
	}
	servers := cf.Configuration().Servers
	inConfig := map[string]bool{}
	addrs := map[string]string{}
	for _, srv := range servers {
		id := string(srv.ID)
		inConfig[id] = true
		if info, ok := book[id]; ok && info.HTTP != "" && id != s.cfg.NodeID {
			addrs[id] = info.HTTP
		}
	}
	peers := fetchStatuses(ctx, s.peerHTTPClient(), s.httpScheme(), addrs)
	var failing map[string]heartbeatFailure
	if s.raft.State() == raft.Leader && s.watch != nil {
		failing = s.watch.failures()
	}
	// The newest log index any server reported: the leader's, normally.
	head := self.LastLogIndex
	for _, ps := range peers {
		if ps.err == nil {
			head = max(head, ps.st.LastLogIndex)
		}
	}
	lagging := uint64(1000)
	staleContact := 3 * s.cfg.HeartbeatTimeout
	_, leader := s.raft.LeaderWithID()
	var rows []memberRow
	for _, srv := range servers {
		id := string(srv.ID)
		row := memberRow{Name: id, Voter: srv.Suffrage == raft.Voter, Self: id == s.cfg.NodeID, Role: "unknown", Health: "unknown"}
		info, known := book[id]
		if known {
			row.RPCAddr, row.Gossip = info.RPCAddr, info.State
			if info.HTTP != "" {
				row.Link = s.httpScheme() + "://" + info.HTTP + "/"
			}
		}
		if srv.Suffrage != raft.Voter {
			row.Role = "non-voter"
		}
		var why []string
		var lastLog uint64
		var contactMS int64 = -2 // unknown
		switch ps, asked := peers[id]; {
		case row.Self:
			row.Role = strings.ToLower(s.raft.State().String())
			row.Health = "up"
			lastLog, contactMS = self.LastLogIndex, self.LastContactMS
		case !asked:
			why = append(why, "no status address known")
		case ps.err != nil:
			row.Health = "down"
			why = append(why, "no answer: "+ps.err.Error())
		default:
			row.Role = strings.ToLower(ps.st.RaftState)
			row.Health = "up"
			lastLog, contactMS = ps.st.LastLogIndex, ps.st.LastContactMS
		}
		if raft.ServerID(id) == leader && row.Health != "down" {
			row.Role = "leader"
		}
		if f, ok := failing[id]; ok {
			row.Health = "down"
			why = append(why, "heartbeats failing for "+fmtDur(time.Since(f.Since)))
			if !f.LastContact.IsZero() {
				contactMS = time.Since(f.LastContact).Milliseconds()
			}
		}
		if row.Gossip == "dead" {
			row.Health = "down"
			why = append(why, "gossip: dead")
		}
		switch {
		case contactMS == 0 && row.Role == "leader":
			row.LastContact = "leader"
		case contactMS == -1:
			row.LastContact = "never"
		case contactMS >= 0:
			row.LastContact = fmtDur(time.Duration(contactMS)*time.Millisecond) + " ago"
		default:
			row.LastContact = "—"
		}
		if row.Health == "up" {
			if lastLog > 0 && head >= lastLog {
				lag := head - lastLog
				row.Lag = fmt.Sprintf("%d", lag)
				if lag > lagging {
					row.Health = "lagging"
					why = append(why, fmt.Sprintf("%d log entries behind", lag))
				}
			}
			if row.Role != "leader" && contactMS > staleContact.Milliseconds() {
				row.Health = "lagging"
				why = append(why, "no contact with the leader for "+row.LastContact)
			}
		}
		row.Why = strings.Join(why, "; ")
		rows = append(rows, row)
	}
	var extra []string
	for id, info := range book {
		if !inConfig[id] {
			extra = append(extra, fmt.Sprintf("%s (gossip %s)", id, orUnknown(info.State)))
		}
	}
	sort.Strings(extra)
	note := ""
	if len(extra) > 0 {
		note = "Known by gossip, not in the raft configuration: " + strings.Join(extra, ", ")
	}
	if s.raft.State() != raft.Leader {
		if note != "" {
			note += ". "
		}
		note += "This server is not the leader: heartbeat health is known only to the master"
	}
	return rows, note
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func (s *Server) nodePageData(path string) *nodePage {
	p := &nodePage{pageHeader: s.header(path), Path: path}
	now := s.clock.Now()
	root := fs.Root(s.cfg.Cell)
	// Breadcrumbs: /ls/cell/a/b → ls, cell, a, b (the first two as one).
	if rest, ok := strings.CutPrefix(path, root); ok {
		p.Crumbs = append(p.Crumbs, crumb{Name: root, Link: root})
		acc := root
		for _, part := range strings.Split(strings.Trim(rest, "/"), "/") {
			if part == "" {
				continue
			}
			acc += "/" + part
			p.Crumbs = append(p.Crumbs, crumb{Name: part, Link: acc})
		}
	}
	var li fs.LockInfo
	var children []string
	var err error
	s.fsm.read(func(st *fs.State) {
		p.Stat, err = st.Stat(path)
		if err != nil {
			return
		}
		li, _ = st.Lock(path)
		if p.Stat.IsDir {
			children, _ = st.Children(path, 0)
		}
	})
	if err != nil {
		p.Error = err.Error()
		return p
	}
	p.Kind = "file"
	if p.Stat.IsDir {
		p.Kind = "directory"
	}
	if p.Stat.Ephemeral {
		p.Kind = fmt.Sprintf("ephemeral %s of session %d", p.Kind, p.Stat.Owner)
	}
	p.Modified = fmtDur(now.Sub(time.Unix(0, p.Stat.Mtime))) + " ago (" + time.Unix(0, p.Stat.Mtime).UTC().Format(time.RFC3339) + ")"
	p.LockHeld = len(li.Holders) > 0 || len(li.Waiters) > 0 || li.DelayUntil > now.UnixNano()
	p.LockRows = s.lockRows(now, []fs.LockInfo{li})
	base := strings.TrimSuffix(path, "/")
	for i, c := range children {
		if i >= pageMaxChildren {
			p.MoreChilds = len(children) - i
			break
		}
		p.Children = append(p.Children, crumb{Name: c, Link: base + "/" + c})
	}
	return p
}

// counterValue reads a counter.
func counterValue(c prometheus.Counter) uint64 {
	var pm dto.Metric
	if c.Write(&pm) != nil || pm.Counter == nil {
		return 0
	}
	return uint64(pm.Counter.GetValue())
}

// deniedCounts reads chubby_calls_denied_total by reason, most first.
func deniedCounts(v *prometheus.CounterVec) []deniedRow {
	var out []deniedRow
	for r := range deniedReasons {
		out = append(out, deniedRow{Reason: r, Count: counterValue(v.WithLabelValues(r))})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Reason < out[j].Reason
	})
	return out
}

func secondsRow(h histSummary) histRow {
	f := func(v float64) string {
		if math.IsInf(v, 1) {
			return "beyond the buckets"
		}
		return fmtDur(time.Duration(v * float64(time.Second)))
	}
	return histRow{Count: h.Count, P50: f(h.P50), P99: f(h.P99), Max: "≤ " + f(h.Max)}
}

func ratioRow(h histSummary) histRow {
	f := func(v float64) string {
		if math.IsInf(v, 1) {
			return "> 1"
		}
		return fmt.Sprintf("%.2f", v)
	}
	return histRow{Count: h.Count, P50: f(h.P50), P99: f(h.P99), Max: "≤ " + f(h.Max)}
}

// fmtDur prints a duration with about three significant digits.
func fmtDur(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(10 * time.Microsecond).String()
	case d < time.Minute:
		return d.Round(10 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
