package main

import (
	"context"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/chubby-dev/chubby/client"
)

// Tab completion in the interactive shell: command names, a command's flags,
// the paths of the cell (children listed through the client, so its cache
// serves repeats), command names after help, and the sequencers of the locks
// this session holds after checkseq and -seq.

// completionTimeout bounds the calls one Tab makes: completion must never
// hang the prompt, even when the cell is unreachable.
const completionTimeout = 2 * time.Second

// statLimit: with more matching children than this, Tab lists names without
// finding out which are directories (one call each).
const statLimit = 32

// completer is readline's AutoCompleter.
type completer struct{ sh *shell }

// Do returns the completions of the word before the cursor as readline
// wants them: the text each would add, and the length of the part of the
// word they complete.
func (c *completer) Do(line []rune, pos int) ([][]rune, int) {
	words, cur, ok := completionWords(string(line[:pos]))
	if !ok {
		return nil, 0
	}
	cands, part := c.sh.complete(words, cur)
	out := make([][]rune, 0, len(cands))
	for _, cand := range cands {
		out = append(out, []rune(cand[len(part):]))
	}
	return out, len([]rune(part))
}

// completionWords splits the text before the cursor into the finished words
// and the word being typed ("" after a space). ok is false inside a quote,
// where no completion applies.
func completionWords(text string) (words []string, cur string, ok bool) {
	words, cur, _, err := scanWords(text)
	return words, cur, err == nil
}

// complete returns the candidates for the word cur after words, each a
// whole replacement for part, the end of cur they complete.
func (sh *shell) complete(words []string, cur string) (cands []string, part string) {
	if len(words) == 0 {
		return prefixed(commandNames(), cur, " "), cur
	}
	c := lookup(words[0])
	if c == nil {
		return nil, ""
	}
	args := words[1:]
	if slices.Contains(args, "--") {
		return nil, "" // CMD ARGS of lock -- CMD: not ours
	}
	if n := len(args); n > 0 {
		if name, ok := flagName(args[n-1]); ok && slices.Contains(c.valueFlags, name) && !strings.Contains(args[n-1], "=") {
			if name == "seq" {
				_, seqs := sh.heldLocks()
				return prefixed(seqs, cur, " "), cur
			}
			return nil, ""
		}
	}
	if _, ok := flagName(cur); ok || cur == "-" {
		var fl []string
		for _, f := range c.boolFlags {
			fl = append(fl, "-"+f)
		}
		for _, f := range c.valueFlags {
			fl = append(fl, "-"+f)
		}
		return prefixed(fl, cur, " "), cur
	}
	kind := argOther
	if n := positionalCount(args, c); n < len(c.args) {
		kind = c.args[n]
	}
	switch kind {
	case argPath:
		return sh.completePath(cur, false)
	case argDir:
		return sh.completePath(cur, true)
	case argCommand:
		return prefixed(commandNames(), cur, " "), cur
	case argSeq:
		_, seqs := sh.heldLocks()
		return prefixed(seqs, cur, " "), cur
	}
	return nil, ""
}

// flagName is the name of a flag word (-name, --name, -name=value); words
// like -1 are not flags, as parseArgs has it.
func flagName(w string) (string, bool) {
	if len(w) < 2 || w[0] != '-' || (w[1] >= '0' && w[1] <= '9') || w == "--" {
		return "", false
	}
	name := strings.TrimLeft(w, "-")
	if i := strings.IndexByte(name, '='); i >= 0 {
		name = name[:i]
	}
	return name, true
}

// positionalCount counts the positional arguments among args, skipping
// flags and the values of valued flags.
func positionalCount(args []string, c *command) int {
	n := 0
	for i := 0; i < len(args); i++ {
		name, ok := flagName(args[i])
		if !ok {
			n++
			continue
		}
		if slices.Contains(c.valueFlags, name) && !strings.Contains(args[i], "=") {
			i++
		}
	}
	return n
}

// prefixed are the words that start with cur, each followed by suffix.
func prefixed(words []string, cur, suffix string) []string {
	var out []string
	for _, w := range words {
		if strings.HasPrefix(w, cur) {
			out = append(out, w+suffix)
		}
	}
	return out
}

// completePath completes a path (relative ones against the current
// directory): directories get a "/" to go on typing, files a space. With
// dirsOnly (cd), files are left out.
func (sh *shell) completePath(cur string, dirsOnly bool) ([]string, string) {
	i := strings.LastIndexByte(cur, '/')
	dirPart, base := cur[:i+1], cur[i+1:]
	var dir string
	if strings.HasPrefix(cur, "/") {
		dir = path.Clean(dirPart)
	} else {
		dir = resolvePath(sh.dir(), dirPart)
	}
	names, isDir := sh.children(dir, base)
	var cands []string
	for _, n := range names {
		switch d, known := isDir[n]; {
		case known && d:
			cands = append(cands, n+"/")
		case known && !d:
			if !dirsOnly {
				cands = append(cands, n+" ")
			}
		default:
			cands = append(cands, n)
		}
	}
	return cands, base
}

// children lists the children of dir that start with prefix and, when
// there are few enough, which of them are directories. "/" and "/ls" are
// not nodes of the cell: their only child leads to the cell's root.
func (sh *shell) children(dir, prefix string) (names []string, isDir map[string]bool) {
	cell := sh.cli.Cell()
	switch dir {
	case "/":
		return prefixed([]string{"ls"}, prefix, ""), map[string]bool{"ls": true}
	case "/ls":
		return prefixed([]string{cell}, prefix, ""), map[string]bool{cell: true}
	}
	if !within(cellRoot(cell), dir) {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
	defer cancel()
	kids, err := onNode(ctx, sh, dir, (*client.Handle).ReadDir)
	if err != nil {
		return nil, nil
	}
	names = prefixed(kids, prefix, "")
	sort.Strings(names)
	isDir = map[string]bool{}
	if len(names) > statLimit {
		return names, isDir
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if st, err := onNode(ctx, sh, path.Join(dir, n), (*client.Handle).GetStat); err == nil {
				mu.Lock()
				isDir[n] = st.IsDir
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return names, isDir
}
