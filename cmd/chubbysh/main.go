package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/chubby-dev/chubby/client"
	"github.com/chubby-dev/chubby/internal/commalist"
	"golang.org/x/term"
)

// Exit codes of CONTRACT.md.
const (
	exitOK          = 0
	exitFailed      = 1
	exitUsage       = 2
	exitUnreachable = 3
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("chubbysh", flag.ContinueOnError)
	fl.SetOutput(stderr)
	defCell := os.Getenv("CHUBBY_CELL")
	if defCell == "" {
		defCell = "127.0.0.1:7100"
	}
	cell := fl.String("cell", defCell, "comma-separated RPC addresses of servers of the cell ($CHUBBY_CELL)")
	ttl := fl.Duration("ttl", 0, "session TTL to ask for (default: the cell's, 12s)")
	timeout := fl.Duration("timeout", 10*time.Second, "how long to keep trying to reach the cell when starting a session")
	jsonOut := fl.Bool("json", false, "print exactly one JSON object per command on stdout")
	caFile := fl.String("ca", os.Getenv("CHUBBY_CACERT"), "PEM CA of a cell with TLS ($CHUBBY_CACERT)")
	certFile := fl.String("cert", os.Getenv("CHUBBY_CERT"), "PEM client certificate: its common name is the principal ($CHUBBY_CERT)")
	keyFile := fl.String("key", os.Getenv("CHUBBY_KEY"), "PEM client key ($CHUBBY_KEY)")
	fl.Usage = func() {
		fmt.Fprintf(stderr, "usage: chubbysh [-cell ADDRS] [-ttl DUR] [-timeout DUR] [-json] [-ca FILE -cert FILE -key FILE] [COMMAND ARGS...]\n\n")
		fl.PrintDefaults()
		fmt.Fprintf(stderr, "\n%s", commandSummary(palette{}))
	}
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	sh := &shell{
		servers: splitServers(*cell),
		ttl:     *ttl,
		timeout: *timeout,
		json:    *jsonOut,
		stdout:  stdout,
		stderr:  stderr,
		held:    map[string]*client.Handle{},
		errPal:  palette{on: colorAllowed(stderr, *jsonOut)},
		outPal:  palette{on: colorAllowed(stdout, *jsonOut)},
	}
	if len(sh.servers) == 0 {
		return sh.report("-cell", &usageError{"no server addresses"})
	}
	if *caFile != "" || *certFile != "" || *keyFile != "" {
		tc, err := tlsConfig(*caFile, *certFile, *keyFile)
		if err != nil {
			return sh.report("tls", err)
		}
		sh.tls = tc
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	sh.signals = sigs
	defer sh.close()

	if fl.NArg() > 0 {
		words := fl.Args()
		if code, ok := sh.checkUsage(words); !ok {
			return code
		}
		sh.oneShot = true
		sh.stdin = stdin
		return sh.exec(words)
	}
	if f, ok := stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return sh.interactive(f, sigs)
	}
	return sh.script(stdin)
}

func splitServers(s string) []string { return commalist.Split(s) }

// script runs one command a line in one session, stopping at the first
// failing line with its exit code.
func (sh *shell) script(stdin io.Reader) int {
	sc := bufio.NewScanner(stdin)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		sh.emitted = false
		words, err := splitLine(sc.Text())
		if err != nil {
			return sh.report(fmt.Sprintf("line %d", line), &usageError{err.Error()})
		}
		if len(words) == 0 {
			continue
		}
		if words[0] == "exit" || words[0] == "quit" {
			return exitOK
		}
		if code := sh.exec(words); code != exitOK {
			return code
		}
	}
	if err := sc.Err(); err != nil {
		return sh.report("read script", &usageError{err.Error()})
	}
	return exitOK
}

// ensureSession dials the cell on first use.
func (sh *shell) ensureSession() error {
	return sh.dial(context.Background())
}

// dial creates the session unless there is one; it gives up after -timeout
// or when ctx ends.
func (sh *shell) dial(ctx context.Context) error {
	if sh.cli != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, sh.timeout)
	defer cancel()
	cli, err := client.Dial(ctx, client.Config{Servers: sh.servers, SessionTTL: sh.ttl, TLS: sh.tls})
	if err != nil {
		return err
	}
	sh.cli = cli
	return nil
}

func (sh *shell) sessionGone() bool {
	select {
	case <-sh.cli.Done():
		return true
	default:
		return false
	}
}

// close ends the session, which releases its locks at once.
func (sh *shell) close() {
	if sh.cli != nil {
		sh.cli.Close()
	}
}
