package main

import (
	"fmt"
	"strings"
)

// cmdArgs are a command's positional arguments and flags. Flags may appear
// anywhere after the command name (`write PATH DATA -seq SEQ`); everything
// after `--` is kept verbatim in rest.
type cmdArgs struct {
	pos   []string
	flags map[string]string
	rest  []string
	dash  bool // `--` was present
}

// parseArgs splits args by the command's known boolean and valued flags.
func parseArgs(args []string, boolFlags, valueFlags []string) (*cmdArgs, error) {
	a := &cmdArgs{flags: map[string]string{}}
	isBool := map[string]bool{}
	for _, f := range boolFlags {
		isBool[f] = true
	}
	isValue := map[string]bool{}
	for _, f := range valueFlags {
		isValue[f] = true
	}
	for i := 0; i < len(args); i++ {
		t := args[i]
		if t == "--" {
			a.dash = true
			a.rest = args[i+1:]
			return a, nil
		}
		if len(t) < 2 || t[0] != '-' || (t[1] >= '0' && t[1] <= '9') {
			a.pos = append(a.pos, t)
			continue
		}
		name := strings.TrimLeft(t, "-")
		val, hasVal := "", false
		if j := strings.IndexByte(name, '='); j >= 0 {
			name, val, hasVal = name[:j], name[j+1:], true
		}
		switch {
		case isBool[name]:
			if hasVal && val != "true" && val != "false" {
				return nil, fmt.Errorf("flag -%s takes no value", name)
			}
			if !hasVal || val == "true" {
				a.flags[name] = "true"
			}
		case isValue[name]:
			if !hasVal {
				if i+1 >= len(args) {
					return nil, fmt.Errorf("flag -%s needs a value", name)
				}
				i++
				val = args[i]
			}
			a.flags[name] = val
		default:
			if near, ok := nearest(name, append(append([]string(nil), boolFlags...), valueFlags...)); ok {
				return nil, fmt.Errorf("unknown flag %s; did you mean -%s?", t, near)
			}
			return nil, fmt.Errorf("unknown flag %s", t)
		}
	}
	return a, nil
}

func (a *cmdArgs) has(name string) bool { _, ok := a.flags[name]; return ok }

// splitLine splits a script line into words like a POSIX shell would for
// plain words, 'single quotes', "double quotes" and backslash escapes.
func splitLine(line string) ([]string, error) {
	words, cur, inWord, err := scanWords(line)
	if err != nil {
		return nil, err
	}
	if inWord {
		words = append(words, cur)
	}
	return words, nil
}

// scanWords is the one word splitter of the shell (scripts, the prompt and
// its completion): plain words, 'single quotes', "double quotes" (in which
// a backslash escapes " \ $ `), backslash escapes and # comments. words
// are the finished words; cur is the word at the end of line, inWord
// whether one was begun; err reports an unterminated quote.
func scanWords(line string) (words []string, cur string, inWord bool, err error) {
	var b strings.Builder
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case ch == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, "", false, fmt.Errorf("unterminated single quote")
			}
			b.WriteString(line[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case ch == '"':
			i++
			for ; i < len(line) && line[i] != '"'; i++ {
				if line[i] == '\\' && i+1 < len(line) && strings.IndexByte("\"\\$`", line[i+1]) >= 0 {
					i++
				}
				b.WriteByte(line[i])
			}
			if i >= len(line) {
				return nil, "", false, fmt.Errorf("unterminated double quote")
			}
			inWord = true
		case ch == '\\':
			if i+1 < len(line) {
				i++
				b.WriteByte(line[i])
			}
			inWord = true
		case ch == ' ' || ch == '\t':
			if inWord {
				words = append(words, b.String())
				b.Reset()
				inWord = false
			}
		case ch == '#' && !inWord:
			i = len(line)
		default:
			b.WriteByte(ch)
			inWord = true
		}
	}
	return words, b.String(), inWord, nil
}
