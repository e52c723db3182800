package sessions

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/simlock/simlock/contract"
)

// OwnerDigest is what the broker keeps of an owner token: the token itself
// is a liveness credential and never reaches the disk.
func OwnerDigest(token string) string {
	h := sha256.Sum256([]byte("simlock-session-owner\x00" + token))
	return hex.EncodeToString(h[:])
}

// PrincipalOwnerDigest is the owner digest of a token presented by an
// agent principal: the session is bound to the principal as well as to
// the token (ADR 0063), so the same token from another principal is, to
// every lookup and comparison, a different token.
func PrincipalOwnerDigest(principal, token string) string {
	h := sha256.Sum256([]byte("simlock-session-owner-principal\x00" + principal + "\x00" + token))
	return hex.EncodeToString(h[:])
}

// Canonical is the configuration's canonical JSON: the struct's own
// encoding re-encoded through a generic value, so object keys are sorted
// and two configs that mean the same bytes hash the same.
func Canonical(cfg contract.SessionConfig) ([]byte, error) {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // integers keep their exact digits
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// Identity is the operation identity of a prepare: SHA-256 over the owner
// token's digest and the canonical configuration. The same pair is the
// same operation forever; a new request id is a new one.
func Identity(ownerDigest string, cfg contract.SessionConfig) (string, error) {
	c, err := Canonical(cfg)
	if err != nil {
		return "", fmt.Errorf("sessions: canonical config: %w", err)
	}
	h := sha256.New()
	h.Write([]byte(ownerDigest))
	h.Write([]byte{0})
	h.Write(c)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// IdempotencyKey is the core lease request's key for an identity, so the
// core's durable request is the replay guarantee under the broker's own.
func IdempotencyKey(identity string) string { return "session:" + identity }

// DecodeConfig strictly decodes a session configuration as a caller wrote
// it (the CLI's --config, the MCP server's --session-config) and checks it.
func DecodeConfig(raw []byte) (contract.SessionConfig, error) {
	var cfg contract.SessionConfig
	if err := contract.Decode(raw, &cfg); err != nil {
		return cfg, contract.SessionConfigDecodeError(contract.AsError(err), "")
	}
	return cfg, CheckConfig(cfg)
}

// MaxRequestID bounds a request id: it is stored and echoed.
const MaxRequestID = 256

// CheckConfig refuses a configuration the broker cannot serve, naming the
// field at fault. contractVersion comes first: a newer contract's other
// fields mean nothing to this one.
func CheckConfig(cfg contract.SessionConfig) error {
	if cfg.ContractVersion != 1 {
		return contract.Errorf(contract.CodeContractUnsupported, "session config contractVersion %d is not served here; this daemon serves 1", cfg.ContractVersion)
	}
	bad := func(f string, a ...any) error {
		return contract.Errorf(contract.CodeSessionConfigInvalid, "session config: "+f, a...)
	}
	if cfg.RequestID == "" || len(cfg.RequestID) > MaxRequestID {
		return bad("requestId must be 1 to %d characters", MaxRequestID)
	}
	for _, r := range cfg.RequestID {
		if r < 0x20 || r == 0x7f {
			return bad("requestId holds a control character")
		}
	}
	if cfg.IdleTimeoutMs < 0 {
		return bad("idleTimeoutMs must not be negative")
	}
	d := cfg.Device
	if d.SchemaVersion != 1 {
		return bad("device.schemaVersion must be 1, not %d", d.SchemaVersion)
	}
	if d.Platform != "ios" && d.Platform != "android" {
		return bad("device.platform must be ios or android, not %q", d.Platform)
	}
	if h := d.Hardware; h != nil {
		switch h.Kind {
		case contract.HardwareArchetype:
			if h.Archetype == "" || h.ModelType != nil || h.Model != nil {
				return bad("device.hardware of kind archetype carries archetype only")
			}
		case contract.HardwareModelType:
			if h.ModelType == nil || h.ModelType.Family == "" || h.Archetype != "" || h.Model != nil {
				return bad("device.hardware of kind modelType carries modelType {family, variant} only")
			}
		case contract.HardwareModel:
			if h.Model == nil || h.Model.Namespace == "" || h.Model.Value == "" || h.Archetype != "" || h.ModelType != nil {
				return bad("device.hardware of kind model carries model {namespace, value} only")
			}
		default:
			return bad("device.hardware.kind must be archetype, modelType or model, not %q", h.Kind)
		}
	}
	if o := d.OS; o != nil {
		switch o.Kind {
		case contract.OSOmitted, contract.OSLatest:
			if o.Version != "" {
				return bad("device.os of kind %s carries no version", o.Kind)
			}
		case contract.OSExact, contract.OSAtLeast:
			if o.Version == "" {
				return bad("device.os of kind %s needs a version", o.Kind)
			}
		default:
			return bad("device.os.kind must be omitted, exact, atLeast or latest, not %q", o.Kind)
		}
	}
	return nil
}

// AbandonIdentity keys the tombstone session.abandon writes: it answers
// for the owner and request id whatever configuration a late prepare of
// them brings.
func AbandonIdentity(ownerDigest, requestID string) string {
	h := sha256.Sum256([]byte("simlock-session-abandon\x00" + ownerDigest + "\x00" + requestID))
	return hex.EncodeToString(h[:])
}

// LoadConfig reads a session configuration given on a command line or in
// the environment: a value starting with "{" is the JSON itself, anything
// else names a file (read through readFile).
func LoadConfig(v string, readFile func(string) ([]byte, error)) (contract.SessionConfig, error) {
	raw := []byte(v)
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		b, err := readFile(v)
		if err != nil {
			return contract.SessionConfig{}, contract.Errorf(contract.CodeSessionConfigInvalid, "read the session config: %v", err)
		}
		raw = b
	}
	return DecodeConfig(raw)
}
