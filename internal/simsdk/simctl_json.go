package simsdk

import (
	"fmt"
	"strconv"
	"strings"
)

// simctl prints JSON through NSJSONSerialization's pretty printer, which
// differs from encoding/json in ways parsers (and eyes) notice: `"key" :
// value`, two-space indentation, empty containers printed with a blank
// line inside, "/" escaped as "\/" unless -e, and non-ASCII left raw.
// Keys come out in the order given, because simctl's order is stable per
// Xcode version and the captures show it.

// jsonObject is an object with ordered keys.
type jsonObject []jsonField

type jsonField struct {
	Key   string
	Value any // jsonObject, []any, string, bool, int, int64, uint32
}

type appleJSON struct {
	b             strings.Builder
	escapeSlashes bool
}

// renderAppleJSON renders v and a final newline.
func renderAppleJSON(v any, escapeSlashes bool) string {
	w := &appleJSON{escapeSlashes: escapeSlashes}
	w.value(v, 0)
	w.b.WriteByte('\n')
	return w.b.String()
}

func (w *appleJSON) indent(depth int) {
	for range depth {
		w.b.WriteString("  ")
	}
}

func (w *appleJSON) value(v any, depth int) {
	switch x := v.(type) {
	case jsonObject:
		if len(x) == 0 {
			w.b.WriteString("{\n\n")
			w.indent(depth)
			w.b.WriteByte('}')
			return
		}
		w.b.WriteString("{\n")
		for i, f := range x {
			w.indent(depth + 1)
			w.str(f.Key)
			w.b.WriteString(" : ")
			w.value(f.Value, depth+1)
			if i < len(x)-1 {
				w.b.WriteByte(',')
			}
			w.b.WriteByte('\n')
		}
		w.indent(depth)
		w.b.WriteByte('}')
	case []any:
		if len(x) == 0 {
			w.b.WriteString("[\n\n")
			w.indent(depth)
			w.b.WriteByte(']')
			return
		}
		w.b.WriteString("[\n")
		for i, e := range x {
			w.indent(depth + 1)
			w.value(e, depth+1)
			if i < len(x)-1 {
				w.b.WriteByte(',')
			}
			w.b.WriteByte('\n')
		}
		w.indent(depth)
		w.b.WriteByte(']')
	case string:
		w.str(x)
	case bool:
		w.b.WriteString(strconv.FormatBool(x))
	case int:
		w.b.WriteString(strconv.Itoa(x))
	case int64:
		w.b.WriteString(strconv.FormatInt(x, 10))
	case uint32:
		w.b.WriteString(strconv.FormatUint(uint64(x), 10))
	default:
		panic(fmt.Sprintf("simsdk: cannot render %T as simctl JSON", v))
	}
}

func (w *appleJSON) str(s string) {
	w.b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			w.b.WriteString(`\"`)
		case '\\':
			w.b.WriteString(`\\`)
		case '/':
			if w.escapeSlashes {
				w.b.WriteString(`\/`)
			} else {
				w.b.WriteByte('/')
			}
		case '\n':
			w.b.WriteString(`\n`)
		case '\r':
			w.b.WriteString(`\r`)
		case '\t':
			w.b.WriteString(`\t`)
		case '\b':
			w.b.WriteString(`\b`)
		case '\f':
			w.b.WriteString(`\f`)
		default:
			if r < 0x20 {
				fmt.Fprintf(&w.b, `\u%04x`, r)
			} else {
				w.b.WriteRune(r)
			}
		}
	}
	w.b.WriteByte('"')
}
