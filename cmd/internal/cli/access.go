package cli

import (
	"errors"
	"fmt"

	"github.com/kjob/kjob"
	"github.com/kjob/kjob/internal/store/signing"
)

// SigningOptions selects record signing keys (internal/store/signing).
type SigningOptions struct {
	// KeysDir holds one file per key, named by the key id.
	KeysDir string
	// KeyID is the key the producer signs with.
	KeyID string
	// Required makes the worker dead-letter unsigned records.
	Required bool
}

// RegisterProducer adds the producer's signing flags.
func (o *SigningOptions) RegisterProducer(f *Flags) {
	f.String(&o.KeysDir, "signing-keys-dir", "KJOB_SIGNING_KEYS_DIR", "", "directory with one HMAC key per file, named by key id (empty: do not sign)").Feeds("ProducerConfig.Signer")
	f.String(&o.KeyID, "signing-key-id", "KJOB_SIGNING_KEY_ID", "", "id of the key to sign windows with (a file in --signing-keys-dir)")
}

// RegisterWorker adds the worker's signing flags.
func (o *SigningOptions) RegisterWorker(f *Flags) {
	f.String(&o.KeysDir, "signing-keys-dir", "KJOB_SIGNING_KEYS_DIR", "", "directory with one accepted HMAC key per file, named by key id (empty: do not verify)")
	f.Bool(&o.Required, "signatures-required", "KJOB_SIGNATURES_REQUIRED", false, "dead-letter unsigned windows (signed windows are always verified when keys are set)").Feeds("WorkerConfig.Verifier")
}

// Signer returns the producer's signer, or nil if signing is off.
func (o SigningOptions) Signer() (*signing.Signer, error) {
	k, err := o.signingKey()
	if k == nil || err != nil {
		return nil, err
	}
	return signing.NewSigner(*k)
}

// ProducerSigner returns the signer for ProducerConfig.Signer, or nil if
// signing is off: the key Signer signs with.
func (o SigningOptions) ProducerSigner() (*kjob.Signer, error) {
	k, err := o.signingKey()
	if k == nil || err != nil {
		return nil, err
	}
	return kjob.NewSigner(kjob.SigningKey{ID: k.ID, Secret: k.Secret})
}

// signingKey returns the key the producer signs with, or nil if signing
// is off.
func (o SigningOptions) signingKey() (*signing.Key, error) {
	if o.KeysDir == "" {
		if o.KeyID != "" {
			return nil, fmt.Errorf("--signing-key-id %q needs --signing-keys-dir", o.KeyID)
		}
		return nil, nil
	}
	if o.KeyID == "" {
		return nil, fmt.Errorf("--signing-keys-dir %q needs --signing-key-id: the file name of the key to sign with", o.KeysDir)
	}
	keys, err := signing.LoadKeys(o.KeysDir)
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		if k.ID == o.KeyID {
			return &k, nil
		}
	}
	return nil, fmt.Errorf("--signing-key-id %q: no such file in --signing-keys-dir %q", o.KeyID, o.KeysDir)
}

// Verifier returns the worker's verification function, or nil if
// verification is off.
func (o SigningOptions) Verifier() (*signing.Verifier, error) {
	keys, err := o.verifierKeys()
	if o.KeysDir == "" || err != nil {
		return nil, err
	}
	return signing.NewVerifier(o.Required, keys...)
}

// WorkerVerifier returns the verifier for WorkerConfig.Verifier, or nil if
// verification is off: the keys and setting Verifier uses.
func (o SigningOptions) WorkerVerifier() (*kjob.Verifier, error) {
	keys, err := o.verifierKeys()
	if o.KeysDir == "" || err != nil {
		return nil, err
	}
	ks := make([]kjob.SigningKey, len(keys))
	for i, k := range keys {
		ks[i] = kjob.SigningKey{ID: k.ID, Secret: k.Secret}
	}
	return kjob.NewVerifier(o.Required, ks...)
}

// verifierKeys returns the keys the worker accepts; none, and no error,
// if verification is off (KeysDir empty).
func (o SigningOptions) verifierKeys() ([]signing.Key, error) {
	if o.KeysDir == "" {
		if o.Required {
			return nil, errors.New("--signatures-required needs --signing-keys-dir with the accepted keys")
		}
		return nil, nil
	}
	return signing.LoadKeys(o.KeysDir)
}
