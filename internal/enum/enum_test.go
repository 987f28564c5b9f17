package enum

import "testing"

type color uint8

const (
	red color = iota
	green
	blue
)

var colorNames = [...]string{red: "red", blue: "blue"}

type signed int

func TestName(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{Name(colorNames[:], red, "color"), "red"},
		{Name(colorNames[:], blue, "color"), "blue"},
		{Name(colorNames[:], green, "color"), "color(1)"}, // a gap in the table
		{Name(colorNames[:], color(200), "color"), "color(200)"},
		{Name([]string{"zero"}, signed(-1), "signed"), "signed(-1)"},
		{Name([]string{"zero"}, signed(0), "signed"), "zero"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
