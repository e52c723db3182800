package osversion

import "testing"

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Version
		ok   bool
	}{
		{"16", Version{16, 0, 0}, true},
		{"26.5", Version{26, 5, 0}, true},
		{"17.0.1", Version{17, 0, 1}, true},
		{"007.1", Version{7, 1, 0}, true},
		{"999999.0", Version{999999, 0, 0}, true},
		{"", Version{}, false},
		{"API 36", Version{}, false},
		{"16-beta", Version{}, false},
		{"1.2.3.4", Version{}, false},
		{"1..2", Version{}, false},
		{".1", Version{}, false},
		{"1.", Version{}, false},
		{"1234567", Version{}, false},
		{"+1", Version{}, false},
		{"-1", Version{}, false},
		{" 1", Version{}, false},
		{"１", Version{}, false}, // a full-width digit is not a digit here
	} {
		got, ok := Parse(c.in)
		if ok != c.ok || got != c.want {
			t.Errorf("Parse(%q) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestCompare(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"26.5", "26.5.0", 0},
		{"16", "15.9.9", 1},
		{"17.0.1", "17.1", -1},
		{"2", "10", -1}, // numeric, not lexical
	} {
		a, _ := Parse(c.a)
		b, _ := Parse(c.b)
		if got := a.Compare(b); got != c.want {
			t.Errorf("%s vs %s = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := b.Compare(a); got != -c.want {
			t.Errorf("%s vs %s = %d, want %d", c.b, c.a, got, -c.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"16", "26.5", "1.2.3", "1.2.3.4", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, ok := Parse(s)
		if !ok {
			return
		}
		for _, n := range v {
			if n < 0 || n > 999999 {
				t.Fatalf("Parse(%q) = %v: part out of range", s, v)
			}
		}
		if v.Compare(v) != 0 {
			t.Fatalf("%v differs from itself", v)
		}
	})
}
