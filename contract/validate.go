package contract

import (
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"
)

// MaxIdentifierBytes bounds every identifier a caller supplies (requester,
// owner, lease and token ids, labels, names, idempotency keys). Ids are
// kept in memory and shown in every status, so an unbounded one is a
// memory and bandwidth lever for any caller.
const MaxIdentifierBytes = 256

// freeformTag marks an input field that carries data rather than a name
// (command arguments, stdin): it is passed through untouched.
const freeformTag = "freeform"

// ValidateIdentifier refuses an identifier that is too long, is not UTF-8,
// or holds a character that could rewrite an operator's terminal: C0
// controls (NUL, CR, LF, ESC, ...), DEL, C1 controls, and the bidirectional
// overrides and isolates (U+202A-U+202E, U+2066-U+2069). field names the
// input field in the error.
func ValidateIdentifier(field, v string) error {
	if len(v) > MaxIdentifierBytes {
		return Errorf(CodeBadRequest, "%s is %d bytes; at most %d are allowed", field, len(v), MaxIdentifierBytes).
			WithDetails("field", field, "maxBytes", MaxIdentifierBytes).
			WithNext(fmt.Sprintf("use a %s of at most %d bytes", field, MaxIdentifierBytes))
	}
	if !utf8.ValidString(v) {
		return Errorf(CodeBadRequest, "%s is not valid UTF-8", field).WithDetails("field", field).
			WithNext("send " + field + " as UTF-8 text")
	}
	for i, r := range v {
		if forbiddenRune(r) {
			return Errorf(CodeBadRequest, "%s holds the control character %U at byte %d", field, r, i).
				WithDetails("field", field, "offset", i).
				WithNext("use only printable characters in " + field + " (no control, escape or bidi characters)")
		}
	}
	return nil
}

func forbiddenRune(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f: // C0 and DEL
		return true
	case r >= 0x80 && r <= 0x9f: // C1
		return true
	case r >= 0x202a && r <= 0x202e: // LRE, RLE, PDF, LRO, RLO
		return true
	case r >= 0x2066 && r <= 0x2069: // LRI, RLI, FSI, PDI
		return true
	}
	return false
}

// ValidateInput checks every caller-supplied string in a decoded operation
// input with ValidateIdentifier, walking nested structs, slices, maps and
// pointers; fields tagged `contract:"freeform"` are skipped. It runs in
// DecodeInput, so every frontend (socket, HTTP, MCP, uplink) gets it from
// the one dispatcher, and a new input field is covered without anyone
// remembering to.
func ValidateInput(in any) error {
	return validateValue(reflect.ValueOf(in), "")
}

func validateValue(v reflect.Value, path string) error {
	switch v.Kind() {
	case reflect.String:
		return ValidateIdentifier(path, v.String())
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return validateValue(v.Elem(), path)
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return nil // json.RawMessage and []byte are data, not names
		}
		for i := 0; i < v.Len(); i++ {
			if err := validateValue(v.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			if err := validateValue(iter.Key(), path+" key"); err != nil {
				return err
			}
			if err := validateValue(iter.Value(), fmt.Sprintf("%s[%v]", path, iter.Key())); err != nil {
				return err
			}
		}
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, _, ok := WireName(f)
			if !ok || f.Tag.Get("contract") == freeformTag {
				continue
			}
			if path != "" {
				name = path + "." + name
			}
			if err := validateValue(v.Field(i), name); err != nil {
				return err
			}
		}
	}
	return nil
}

// ScopeRequester is the requester id a session really acts under. A
// non-admin principal's requester ids live in its own namespace,
// "<principal>/<id>", with the bare principal as its default: so no agent
// can act under, squat, or probe another agent's requester id. Scoping is
// idempotent, so an id read back from a lease can be passed in again. Admin
// sessions (the local operator, a gateway forwarding already-scoped ids)
// name requesters as they are.
func ScopeRequester(s Session, id string) string {
	if s.Role == RoleAdmin {
		return id
	}
	p := s.Principal
	if id == "" || id == p || strings.HasPrefix(id, p+"/") {
		if id == "" {
			return p
		}
		return id
	}
	return p + "/" + id
}

// ScopeInput returns in with its top-level RequesterID field, if it has
// one, passed through ScopeRequester. The dispatcher applies it to every
// operation, so handlers and the gateway see only scoped ids.
func ScopeInput(s Session, in any) any {
	if s.Role == RoleAdmin {
		return in
	}
	v := reflect.ValueOf(in)
	if v.Kind() != reflect.Struct {
		return in
	}
	f, ok := v.Type().FieldByName("RequesterID")
	if !ok || f.Type.Kind() != reflect.String {
		return in
	}
	cp := reflect.New(v.Type()).Elem()
	cp.Set(v)
	fv := cp.FieldByIndex(f.Index)
	fv.SetString(ScopeRequester(s, fv.String()))
	return cp.Interface()
}
