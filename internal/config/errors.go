package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// decodeError rewrites a decoding error so it names where the file is
// wrong: the key path, and the line and column, instead of a byte offset
// or (for an unknown key) nothing at all.
func decodeError(data []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		line, col := lineCol(data, se.Offset-1) // Offset is just past the offending byte
		return fmt.Errorf("line %d, column %d: %v", line, col, se)
	case errors.As(err, &te):
		line, col := lineCol(data, valueStart(data, te.Offset))
		path := te.Field
		if path == "" {
			path = "(top level)"
		}
		return fmt.Errorf("%s (line %d, column %d): a %s cannot hold a JSON %s", path, line, col, te.Type, te.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		if path, off, ok := unknownKey(data, reflect.TypeFor[Config]()); ok {
			line, col := lineCol(data, off)
			return fmt.Errorf("%s (line %d, column %d): unknown key", path, line, col)
		}
	}
	return err
}

// lineCol turns a byte offset into a 1-based line and column.
func lineCol(data []byte, off int64) (int, int) {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := int(off) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}

// valueStart walks back from the end of a value (where a type error's
// offset points) to its start, so the column names the value itself.
func valueStart(data []byte, end int64) int64 {
	end = min(max(end, 0), int64(len(data)))
	i := end - 1
	for i > 0 && strings.IndexByte(":,[", data[i-1]) < 0 {
		i--
	}
	for i < end && strings.IndexByte(" \t\r\n", data[i]) >= 0 {
		i++
	}
	return max(i, 0)
}

// unknownKey finds the first object key the type t has no field for,
// returning its dotted path and the offset of the key.
func unknownKey(data []byte, t reflect.Type) (string, int64, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	path, off, ok := walkUnknown(dec, t, "")
	// The offset is where the decoder stood before the key: step over the
	// separator and blanks to its opening quote.
	for ok && off < int64(len(data)) && strings.IndexByte(" \t\r\n,{", data[off]) >= 0 {
		off++
	}
	return path, off, ok
}

func walkUnknown(dec *json.Decoder, t reflect.Type, prefix string) (string, int64, bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	tok, err := dec.Token()
	if err != nil {
		return "", 0, false
	}
	delim, isDelim := tok.(json.Delim)
	if !isDelim {
		return "", 0, false
	}
	switch delim {
	case '[':
		for i := 0; dec.More(); i++ {
			elem := reflect.TypeFor[any]()
			if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
				elem = t.Elem()
			}
			if p, o, ok := walkUnknown(dec, elem, fmt.Sprintf("%s[%d]", prefix, i)); ok {
				return p, o, true
			}
		}
	case '{':
		for dec.More() {
			keyOff := dec.InputOffset()
			kt, err := dec.Token()
			if err != nil {
				return "", 0, false
			}
			key, _ := kt.(string)
			path := key
			if prefix != "" {
				path = prefix + "." + key
			}
			var sub reflect.Type
			switch t.Kind() {
			case reflect.Struct:
				f, found := fieldFor(t, key)
				if !found {
					return path, keyOff, true
				}
				sub = f
			case reflect.Map:
				sub = t.Elem()
			default:
				sub = reflect.TypeFor[any]()
			}
			if p, o, ok := walkUnknown(dec, sub, path); ok {
				return p, o, true
			}
		}
	}
	_, _ = dec.Token() // the closing delimiter
	return "", 0, false
}

// fieldFor is the type of t's field named key in JSON, matched the way
// encoding/json matches (exact tag first, then case-insensitively).
func fieldFor(t reflect.Type, key string) (reflect.Type, bool) {
	var fold reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if name == key {
			return f.Type, true
		}
		if fold == nil && strings.EqualFold(name, key) {
			fold = f.Type
		}
	}
	return fold, fold != nil
}
