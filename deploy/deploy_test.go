// Package deploy_test checks the operator files in deploy/ against the
// server they describe:
//
//	TestAlertRules                       promtool check rules alerts.yml (Debian's
//	                                     prometheus package); fails instead of
//	                                     skipping when CHUBBY_REQUIRE_PROMTOOL is set
//	TestDeployReferencesExportedMetrics  every chubby_* name in alerts.yml and in
//	                                     grafana-dashboard.json is a series a real
//	                                     chubbyd exports (scraped from /metrics after
//	                                     sessions, writes, locks and a denied call);
//	                                     every alert names at least one
package deploy_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chubby-dev/chubby/testing/proc"
)

func TestMain(m *testing.M) { os.Exit(proc.Main(m)) }

func TestAlertRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CHUBBY_REQUIRE_PROMTOOL") != "" {
			t.Fatal("CHUBBY_REQUIRE_PROMTOOL is set but promtool is not on PATH (Debian: apt-get install prometheus)")
		}
		t.Skip("promtool not on PATH (Debian: apt-get install prometheus); set CHUBBY_REQUIRE_PROMTOOL=1 to make this a failure")
	}
	out, err := exec.Command(promtool, "check", "rules", "alerts.yml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules alerts.yml: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// metricName matches a chubby series name in an expression.
var metricName = regexp.MustCompile(`\bchubby_[a-zA-Z0-9_]+`)

// exported scrapes a real chubbyd after some activity and returns every
// series name it exports: each family's name, and for histograms and
// summaries the _bucket, _count and _sum series.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	s := proc.StartServer(t, proc.Options{LogLevel: "info"})
	for _, args := range [][]string{
		{"write", "/ls/local/config", "v1"},
		{"cat", "/ls/local/config"},
		{"trylock", "/ls/local/lock"},
	} {
		if r := s.Sh(t, args...); r.Code != 0 {
			t.Fatalf("%s", r)
		}
	}
	if r := s.Sh(t, "cat", "/etc/passwd"); r.Code != 1 { // denied: bad_path
		t.Fatalf("a bad path: want exit 1\n%s", r)
	}
	hc := &http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get("http://" + s.HTTPAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, line := range strings.Split(string(body), "\n") {
		f := strings.Fields(line)
		if len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			names[f[2]] = true
			if f[3] == "histogram" || f[3] == "summary" {
				for _, suffix := range []string{"_bucket", "_count", "_sum"} {
					names[f[2]+suffix] = true
				}
			}
			continue
		}
		if len(f) >= 2 && !strings.HasPrefix(line, "#") { // a sample: its series must be exported too
			name, _, _ := strings.Cut(f[0], "{")
			names[name] = true
		}
	}
	if !names["chubby_sessions"] || !names["chubby_raft_log_store_seconds_bucket"] {
		t.Fatalf("/metrics does not look like chubbyd's:\n%s", body)
	}
	return names
}

// dashboardExprs returns every "expr" of the dashboard's panels.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("grafana-dashboard.json is not valid JSON: %v", err)
	}
	if dash.Title == "" || len(dash.Panels) == 0 {
		t.Fatalf("grafana-dashboard.json: no title or no panels")
	}
	var exprs []string
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("dashboard panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if !metricName.MatchString(tg.Expr) {
				t.Errorf("dashboard panel %q: query %q names no chubby metric", p.Title, tg.Expr)
			}
			exprs = append(exprs, tg.Expr)
		}
	}
	return exprs
}

// alertExprs returns each alert's text (from its "- alert:" line to the
// next), by alert name.
func alertExprs(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	parts := regexp.MustCompile(`(?m)^\s*- alert:\s*`).Split(string(b), -1)
	for _, part := range parts[1:] {
		name, rest, _ := strings.Cut(part, "\n")
		var expr []string
		for _, line := range strings.Split(rest, "\n") {
			if e, ok := strings.CutPrefix(strings.TrimSpace(line), "expr:"); ok {
				expr = append(expr, e)
			}
		}
		if len(expr) != 1 {
			t.Errorf("alert %s: %d expr lines, want one", name, len(expr))
		}
		out[strings.TrimSpace(name)] = strings.Join(expr, " ")
	}
	if len(out) == 0 {
		t.Fatal("alerts.yml has no alerts")
	}
	return out
}

func TestDeployReferencesExportedMetrics(t *testing.T) {
	names := exported(t)
	check := func(where, expr string) {
		for _, m := range metricName.FindAllString(expr, -1) {
			if !names[m] {
				t.Errorf("%s uses %s, which chubbyd does not export", where, m)
			}
		}
	}
	alerts := alertExprs(t)
	var alertNames []string
	for name := range alerts {
		alertNames = append(alertNames, name)
	}
	sort.Strings(alertNames)
	for _, name := range alertNames {
		expr := alerts[name]
		if !metricName.MatchString(expr) {
			t.Errorf("alert %s names no chubby metric: %q", name, expr)
		}
		check("alert "+name, expr)
	}
	for _, expr := range dashboardExprs(t) {
		check("dashboard query "+expr, expr)
	}
	t.Logf("%d alerts and the dashboard's queries checked against %d exported series", len(alerts), len(names))
}
