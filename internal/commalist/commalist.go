// Package commalist reads the comma-separated lists of the commands' flags
// (-cell, -join, -peers, ...).
package commalist

import "strings"

// Split returns the items of a comma-separated list, each trimmed of
// spaces, empty ones left out ("a, ,b," is [a b]; "" is none).
func Split(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}
