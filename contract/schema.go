package contract

import (
	"encoding/json"
	"reflect"
	"strings"
	"time"
)

//go:generate go run ./gen

// Schema returns a JSON Schema (draft 2020-12) for t, derived from its Go
// declaration: struct fields by their json tags, required unless omitempty
// (a pointer without omitempty is required and may be null),
// additionalProperties false because decoding is strict.
func Schema(t reflect.Type) map[string]any {
	s := schemaFor(t, map[reflect.Type]bool{})
	s["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	return s
}

var (
	timeType = reflect.TypeFor[time.Time]()
	rawType  = reflect.TypeFor[json.RawMessage]()
)

func schemaFor(t reflect.Type, seen map[reflect.Type]bool) map[string]any {
	if t.Kind() == reflect.Pointer {
		return schemaFor(t.Elem(), seen)
	}
	switch t {
	case timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case rawType:
		return map[string]any{}
	}
	switch t.Kind() {
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice, reflect.Array:
		return map[string]any{"type": "array", "items": schemaFor(t.Elem(), seen)}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": schemaFor(t.Elem(), seen)}
	case reflect.Interface:
		return map[string]any{}
	case reflect.Struct:
		if seen[t] {
			return map[string]any{"type": "object"}
		}
		seen[t] = true
		defer delete(seen, t)
		props := map[string]any{}
		required := []string{}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, omitempty, ok := WireName(f)
			if !ok {
				continue
			}
			props[name] = schemaFor(f.Type, seen)
			switch {
			case !omitempty && f.Type.Kind() == reflect.Pointer:
				// Always sent, null when unknown (the device
				// description's facts, contract/describe.go).
				props[name] = map[string]any{"anyOf": []any{props[name], map[string]any{"type": "null"}}}
				required = append(required, name)
			case !omitempty:
				required = append(required, name)
			}
		}
		s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
		if len(required) > 0 {
			s["required"] = required
		}
		return s
	}
	return map[string]any{}
}

// WireName is the name struct field f has on the wire (its json tag, or its
// Go name), and whether the encoder leaves it out when empty; ok is false
// for a field the wire never carries (unexported, or tagged "-").
func WireName(f reflect.StructField) (name string, omitempty, ok bool) {
	if !f.IsExported() {
		return "", false, false
	}
	name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "-" {
		return "", false, false
	}
	if name == "" {
		name = f.Name
	}
	return name, strings.Contains(opts, "omitempty"), true
}

// OperationSchemas returns, for every operation, its input and output
// schemas as indented JSON keyed by "<name>.input" / "<name>.output".
func OperationSchemas() map[string][]byte {
	out := map[string][]byte{}
	for _, op := range Registry() {
		for suffix, t := range map[string]reflect.Type{"input": op.In, "output": op.Out} {
			s := Schema(t)
			s["title"] = op.Name + " " + suffix
			if suffix == "input" {
				s["description"] = op.Doc
			}
			b, _ := json.MarshalIndent(s, "", "  ")
			out[op.Name+"."+suffix] = append(b, '\n')
		}
	}
	return out
}
