package procnemesis

import "fmt"

// Durable is one acknowledged write of the durability workload.
type Durable struct {
	Path  string
	Value string
}

// CheckDurable returns a violation for every acknowledged write whose file
// is missing or holds another value at the end (found: path → contents of
// every file there is).
func CheckDurable(acked []Durable, found map[string]string) []string {
	var bad []string
	for _, d := range acked {
		v, ok := found[d.Path]
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("acknowledged write of %s is lost: the file is missing", d.Path))
		case v != d.Value:
			bad = append(bad, fmt.Sprintf("acknowledged write of %q to %s: the file holds %q", d.Value, d.Path, v))
		}
	}
	return bad
}
