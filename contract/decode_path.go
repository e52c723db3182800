package contract

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// Where a strict decode failed. encoding/json names an unknown field by
// its key alone and a wrong type by its path; the refusal names both by
// their path from the input's root (dotted JSON names, [i] for array
// elements), in the message and as details.field.

// decodeFailure describes a strict-decode error of raw into v: the
// message's text and the field's path ("" when it cannot be told).
func decodeFailure(raw []byte, v any, err error) (msg, field string) {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Sprintf("%s: cannot take a JSON %s (want %s)", te.Field, te.Value, te.Type), te.Field
	}
	const unknown = `json: unknown field "`
	if s := err.Error(); strings.HasPrefix(s, unknown) && strings.HasSuffix(s, `"`) {
		name := strings.TrimSuffix(strings.TrimPrefix(s, unknown), `"`)
		if p := unknownFieldPath(raw, reflect.TypeOf(v), name); p != "" {
			return "unknown field " + p, p
		}
	}
	return err.Error(), ""
}

var (
	rawMessageType  = reflect.TypeFor[json.RawMessage]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textType        = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// unknownFieldPath finds the key name that t has no field for in raw, in
// a stable (sorted) walk.
func unknownFieldPath(raw []byte, t reflect.Type, name string) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return ""
	}
	p, _ := findUnknown(v, t, "", name)
	return p
}

func findUnknown(v any, t reflect.Type, path, name string) (string, bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessageType || t.Kind() == reflect.Interface ||
		reflect.PointerTo(t).Implements(unmarshalerType) || reflect.PointerTo(t).Implements(textType) {
		return "", false // decoded by its own rules, not by field names
	}
	join := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		switch t.Kind() {
		case reflect.Struct:
			fields := jsonFields(t)
			for _, k := range keys {
				ft, ok := fieldFor(fields, k)
				if !ok {
					if k == name {
						return join(k), true
					}
					continue
				}
				if p, ok := findUnknown(x[k], ft, join(k), name); ok {
					return p, true
				}
			}
		case reflect.Map:
			for _, k := range keys {
				if p, ok := findUnknown(x[k], t.Elem(), join(k), name); ok {
					return p, true
				}
			}
		}
	case []any:
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			for i, e := range x {
				if p, ok := findUnknown(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i), name); ok {
					return p, true
				}
			}
		}
	}
	return "", false
}

// jsonFields maps a struct's JSON names to their types, embedded
// structs' fields promoted as encoding/json promotes them.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			et := ft
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				for k, v := range jsonFields(et) {
					if _, taken := out[k]; !taken {
						out[k] = v
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = ft
	}
	return out
}

// fieldFor looks a key up as encoding/json does: exactly, then without
// regard to case.
func fieldFor(fields map[string]reflect.Type, k string) (reflect.Type, bool) {
	if t, ok := fields[k]; ok {
		return t, true
	}
	for n, t := range fields {
		if strings.EqualFold(n, k) {
			return t, true
		}
	}
	return nil, false
}

// SessionConfigDecodeError turns a strict-decode refusal of a field
// inside a session configuration into SESSION_CONFIG_INVALID naming the
// field's path within the configuration, so every surface (socket, HTTP,
// CLI, MCP) gives one code and one path for the same configuration. at is
// where the configuration sits in the decoded input ("" when it is the
// input). It returns nil for a refusal outside the configuration.
func SessionConfigDecodeError(e *Error, at string) *Error {
	if e == nil || e.Code != CodeBadRequest {
		return nil
	}
	field, _ := e.Details["field"].(string)
	rel := field
	if at != "" {
		var ok bool
		if rel, ok = strings.CutPrefix(field, at+"."); !ok {
			return nil
		}
	}
	msg := strings.TrimPrefix(e.Message, "invalid input: ")
	if field != "" {
		msg = strings.Replace(msg, field, rel, 1)
	}
	out := Errorf(CodeSessionConfigInvalid, "session config: %s", msg)
	if rel != "" {
		out = out.WithDetails("field", rel)
	}
	return out
}
