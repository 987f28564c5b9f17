package enum

import "fmt"

// Integer is any integer type an enum is declared on.
type Integer interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64
}

// Name returns names[v], or kind(v) (for example "op(42)") for a value the
// table has no name for.
func Name[T Integer](names []string, v T, kind string) string {
	if v >= 0 && uint64(v) < uint64(len(names)) && names[v] != "" {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", kind, v)
}
