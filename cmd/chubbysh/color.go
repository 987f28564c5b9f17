package main

import (
	"io"
	"os"

	"golang.org/x/term"
)

// palette colours text with ANSI SGR sequences when on, and returns it
// unchanged when off. Each output stream has its own: colour is a property
// of where the text goes (a terminal), not of the shell.
type palette struct{ on bool }

// SGR codes used by the shell.
const (
	sgrRed    = "31"
	sgrGreen  = "32"
	sgrYellow = "33"
	sgrCyan   = "36"
	sgrBold   = "1"
	sgrDim    = "2"
)

func (p palette) paint(code, s string) string {
	if !p.on || s == "" {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

func (p palette) red(s string) string    { return p.paint(sgrRed, s) }
func (p palette) green(s string) string  { return p.paint(sgrGreen, s) }
func (p palette) yellow(s string) string { return p.paint(sgrYellow, s) }
func (p palette) cyan(s string) string   { return p.paint(sgrCyan, s) }
func (p palette) bold(s string) string   { return p.paint(sgrBold, s) }
func (p palette) dim(s string) string    { return p.paint(sgrDim, s) }

// colorAllowed: colour only on a terminal, never with -json, never when
// NO_COLOR is set to anything (https://no-color.org) or TERM is dumb.
func colorAllowed(w io.Writer, jsonOut bool) bool {
	if jsonOut || os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return false
	}
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
