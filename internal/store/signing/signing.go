// Package signing authenticates kjob window records with HMAC-SHA256, so a
// worker runs only windows published by a holder of a signing key.
//
// The producer signs each record with one key (Signer); workers accept
// records signed with any of several keys (Verifier), which is how keys
// rotate without downtime: add the new key to every worker, switch the
// producers to it, then remove the old one from the workers.
//
// The MAC covers the record's topic, key and value and every header whose
// name starts with "kjob-" or is "content-type" (the headers the worker
// reads), in order, each length-prefixed. The value holds the window's
// namespace (internal/store/jobmsg), so the deployment a window belongs to is signed:
// re-labelling a record for another deployment breaks its signature. Other
// headers (tracing, for instance) are not covered and may be added by hooks
// after signing.
// Two headers carry the result: HeaderKeyID names the key, HeaderSignature
// holds the hex MAC.
//
// # Threat model
//
// Signing protects against a principal that can write to the windows topic
// but does not hold a signing key: a leaked or over-broad Kafka credential,
// a misconfigured ACL, a tool producing to the wrong topic. Its records are
// rejected (dead-lettered, never run) by workers that require signatures.
// Binding the topic into the MAC also stops a signed record from being
// copied from another topic (for example the dead-letter topic) into the
// windows topic.
//
// It does not protect against: a holder of a signing key (a compromised
// producer, or anyone who can read the key's Secret); replay of a record
// that was validly signed, by a principal that can write the topic (the
// idempotency key makes a replayed window a no-op while its done marker is
// retained, but a replay after the retention horizon runs it again);
// reading records (signing is not encryption: use TLS in transit and
// broker-side controls at rest); deletion, reordering or withholding of
// records, or a broker that drops them; and anything a worker does with a
// payload it accepted. Keys must be at least 32 bytes of secret randomness.
package signing

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Header names the signature is carried in.
const (
	// HeaderKeyID names the key that signed the record.
	HeaderKeyID = "kjob-signature-key"
	// HeaderSignature is the hex HMAC-SHA256 of the record.
	HeaderSignature = "kjob-signature"
)

// MinKeyBytes is the shortest secret accepted.
const MinKeyBytes = 32

// Errors Verify returns (wrapped), for callers and tests that branch on
// the reason.
var (
	// ErrUnsigned: the record carries no signature headers.
	ErrUnsigned = errors.New("signing: record is not signed")
	// ErrUnknownKey: signed with a key id this verifier does not accept.
	ErrUnknownKey = errors.New("signing: unknown signing key")
	// ErrBadSignature: the MAC does not match (the record was altered, or
	// signed with another secret under the same key id).
	ErrBadSignature = errors.New("signing: bad signature")
)

// Key is one signing key.
type Key struct {
	// ID names the key in HeaderKeyID: letters, digits, '.', '_' or '-'.
	ID string
	// Secret is the HMAC key, at least MinKeyBytes long.
	Secret []byte
}

func (k Key) validate() error {
	if k.ID == "" || strings.IndexFunc(k.ID, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
	}) >= 0 {
		return fmt.Errorf("signing: key id %q: use letters, digits, '.', '_' or '-' (e.g. \"2026-11\")", k.ID)
	}
	if len(k.Secret) < MinKeyBytes {
		return fmt.Errorf("signing: key %q: secret is %d bytes; use at least %d random bytes (e.g. head -c 32 /dev/urandom | base64)", k.ID, len(k.Secret), MinKeyBytes)
	}
	return nil
}

// Signer signs records with one key. It is safe for concurrent use.
type Signer struct {
	key Key
}

// NewSigner validates key and returns a Signer.
func NewSigner(key Key) (*Signer, error) {
	if err := key.validate(); err != nil {
		return nil, err
	}
	return &Signer{key: Key{ID: key.ID, Secret: append([]byte(nil), key.Secret...)}}, nil
}

// KeyID returns the id of the signing key.
func (s *Signer) KeyID() string { return s.key.ID }

// Sign replaces any signature headers of rec with its signature under the
// signer's key. Set rec.Topic first: the topic is signed.
func (s *Signer) Sign(rec *kgo.Record) error {
	if rec.Topic == "" {
		return errors.New("signing: record has no Topic; set it before signing (the topic is covered by the signature)")
	}
	hs := rec.Headers[:0:0]
	for _, h := range rec.Headers {
		if h.Key != HeaderKeyID && h.Key != HeaderSignature {
			hs = append(hs, h)
		}
	}
	hs = append(hs, kgo.RecordHeader{Key: HeaderKeyID, Value: []byte(s.key.ID)})
	rec.Headers = hs
	mac := sum(hmac.New(sha256.New, s.key.Secret), rec, s.key.ID)
	rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: HeaderSignature, Value: []byte(hex.EncodeToString(mac))})
	return nil
}

// Verifier checks records against a set of accepted keys. It is safe for
// concurrent use.
type Verifier struct {
	keys     map[string][]byte
	required bool
}

// NewVerifier validates keys (at least one, distinct ids) and returns a
// Verifier. With required false, unsigned records pass and signed ones are
// still checked: the setting for rolling signing out.
func NewVerifier(required bool, keys ...Key) (*Verifier, error) {
	if len(keys) == 0 {
		return nil, errors.New("signing: no keys: give the verifier every key id producers may sign with")
	}
	v := &Verifier{keys: map[string][]byte{}, required: required}
	for _, k := range keys {
		if err := k.validate(); err != nil {
			return nil, err
		}
		if _, dup := v.keys[k.ID]; dup {
			return nil, fmt.Errorf("signing: key id %q appears twice; give each key a distinct id", k.ID)
		}
		v.keys[k.ID] = append([]byte(nil), k.Secret...)
	}
	return v, nil
}

// Required reports whether unsigned records are refused.
func (v *Verifier) Required() bool { return v.required }

// Verify returns nil if rec is signed by an accepted key, or is unsigned
// and signatures are not required. Otherwise it returns an error wrapping
// ErrUnsigned, ErrUnknownKey or ErrBadSignature.
func (v *Verifier) Verify(rec *kgo.Record) error {
	var id, sig []byte
	var nID, nSig int
	for _, h := range rec.Headers {
		switch h.Key {
		case HeaderKeyID:
			id, nID = h.Value, nID+1
		case HeaderSignature:
			sig, nSig = h.Value, nSig+1
		}
	}
	if nID == 0 && nSig == 0 {
		if v.required {
			return fmt.Errorf("%w (headers %s and %s missing) and signatures are required", ErrUnsigned, HeaderKeyID, HeaderSignature)
		}
		return nil
	}
	if nID != 1 || nSig != 1 {
		return fmt.Errorf("%w: want one %s and one %s header, have %d and %d", ErrBadSignature, HeaderKeyID, HeaderSignature, nID, nSig)
	}
	secret, ok := v.keys[string(id)]
	if !ok {
		return fmt.Errorf("%w %q: add it to the workers' keys, or sign with an accepted key", ErrUnknownKey, shorten(id))
	}
	got := make([]byte, sha256.Size)
	if n, err := hex.Decode(got, sig); err != nil || n != sha256.Size {
		return fmt.Errorf("%w: %s is not %d hex bytes", ErrBadSignature, HeaderSignature, sha256.Size)
	}
	if !hmac.Equal(got, sum(hmac.New(sha256.New, secret), rec, string(id))) {
		return fmt.Errorf("%w under key %q: the record was altered or signed with another secret", ErrBadSignature, string(id))
	}
	return nil
}

func shorten(b []byte) string {
	if len(b) > 64 {
		return string(b[:64]) + "..."
	}
	return string(b)
}

// covered reports whether header name is signed.
func covered(name string) bool {
	return name != HeaderSignature && (strings.HasPrefix(name, "kjob-") || name == "content-type")
}

// sum computes the MAC: a version label, then topic, key, value and each
// covered header name and value, each prefixed by its length, then the key
// id. HeaderKeyID is covered like any kjob header.
func sum(h hash.Hash, rec *kgo.Record, keyID string) []byte {
	var n [4]byte
	field := func(b []byte) {
		binary.BigEndian.PutUint32(n[:], uint32(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	field([]byte("kjob-hmac-sha256-v1"))
	field([]byte(rec.Topic))
	field(rec.Key)
	field(rec.Value)
	for _, hd := range rec.Headers {
		if covered(hd.Key) {
			field([]byte(hd.Key))
			field(hd.Value)
		}
	}
	field([]byte(keyID))
	return h.Sum(nil)
}
