package kjob

import (
	"github.com/kjob/kjob/internal/store/signing"
)

// MinSigningKeyBytes is the shortest signing secret NewSigner and
// NewVerifier accept.
const MinSigningKeyBytes = 32

// SigningKey is one HMAC-SHA256 key for signing window records, so a
// worker runs only windows published by a holder of a key: a producer
// signs with one key (NewSigner), workers accept any of several
// (NewVerifier), which is how keys rotate without downtime. See
// deploy/SECURITY.md for what signing does and does not protect against.
type SigningKey struct {
	// ID names the key in each signed record: letters, digits, '.', '_'
	// or '-' (e.g. "2026-11").
	ID string
	// Secret is the HMAC key: at least MinSigningKeyBytes of secret
	// randomness.
	Secret []byte
}

// LoadSigningKeys reads one key per regular file in dir, as the kjob
// binaries do for --signing-keys-dir: the file name is the key id, its
// content (trailing whitespace ignored) the secret. Names starting with
// '.' are skipped, so a mounted Kubernetes Secret works as is. Keys are
// returned sorted by id.
func LoadSigningKeys(dir string) ([]SigningKey, error) {
	keys, err := signing.LoadKeys(dir)
	if err != nil {
		return nil, err
	}
	out := make([]SigningKey, len(keys))
	for i, k := range keys {
		out[i] = SigningKey{ID: k.ID, Secret: k.Secret}
	}
	return out, nil
}

// Signer signs every window record a producer publishes with one key
// (ProducerConfig.Signer). Make one with NewSigner. It is safe for
// concurrent use.
type Signer struct{ s *signing.Signer }

// NewSigner checks key (a valid id, a secret of at least
// MinSigningKeyBytes) and returns a Signer for it.
func NewSigner(key SigningKey) (*Signer, error) {
	s, err := signing.NewSigner(signing.Key{ID: key.ID, Secret: key.Secret})
	if err != nil {
		return nil, err
	}
	return &Signer{s: s}, nil
}

// KeyID returns the id of the signing key.
func (s *Signer) KeyID() string { return s.s.KeyID() }

// Verifier checks window records' signatures against a set of accepted
// keys (WorkerConfig.Verifier); a record it refuses is dead-lettered,
// never run. Make one with NewVerifier. It is safe for concurrent use.
type Verifier struct{ v *signing.Verifier }

// NewVerifier checks keys (at least one, distinct ids, each valid) and
// returns a Verifier accepting records signed with any of them. With
// required false, unsigned records pass and signed ones are still checked:
// the setting for rolling signing out.
func NewVerifier(required bool, keys ...SigningKey) (*Verifier, error) {
	ks := make([]signing.Key, len(keys))
	for i, k := range keys {
		ks[i] = signing.Key{ID: k.ID, Secret: k.Secret}
	}
	v, err := signing.NewVerifier(required, ks...)
	if err != nil {
		return nil, err
	}
	return &Verifier{v: v}, nil
}

// Required reports whether unsigned records are refused.
func (v *Verifier) Required() bool { return v.v.Required() }
