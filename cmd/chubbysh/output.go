package main

// How chubbysh prints: one JSON object per command with -json, text
// otherwise, and errors as one line on stderr.

import (
	"encoding/json"
	"fmt"
	"strings"
)

// errorf prints one line `chubbysh: ...` on stderr (red on a terminal).
func (sh *shell) errorf(format string, args ...any) {
	fmt.Fprintf(sh.stderr, "%s\n", sh.errPal.red(fmt.Sprintf("chubbysh: "+format, args...)))
}

// emit prints one JSON object on one line.
func (sh *shell) emit(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		sh.errorf("encode json: %v", err)
		return
	}
	fmt.Fprintf(sh.stdout, "%s\n", b)
	sh.emitted = true
}

// out prints the JSON object in -json mode and the text otherwise.
func (sh *shell) out(obj any, text string) {
	if sh.json {
		sh.emit(obj)
		return
	}
	if text != "" {
		fmt.Fprint(sh.stdout, text)
		if !strings.HasSuffix(text, "\n") {
			fmt.Fprintln(sh.stdout)
		}
	}
}
