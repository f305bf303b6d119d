package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/backoff"
	"github.com/kjob/kjob/pkg/access"
	"github.com/kjob/kjob/pkg/signing"
)

// CheckKafkaAccess verifies, before a component starts, that its Kafka
// principal holds the role's grants (pkg/access). It retries while Kafka
// cannot be reached and returns nil when every grant that can be checked is
// held, an error naming the missing grants (wrapping access.ErrMissing), or
// ctx.Err().
func CheckKafkaAccess(ctx context.Context, log *slog.Logger, brokers []string, opts []kgo.Opt, need []access.Permission) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	b := backoff.Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second}
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		unverified, err := access.Check(cctx, cl, need)
		cancel()
		if err == nil {
			for _, p := range unverified {
				log.Info("kafka grant not verifiable before use; a refusal will show as an authorization error", "grant", p.String())
			}
			return nil
		}
		if errors.Is(err, access.ErrMissing) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		delay := b.Next()
		log.Warn("cannot check kafka access yet; retrying", "err", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
	}
}

// SigningOptions selects record signing keys (pkg/signing).
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
	f.String(&o.KeysDir, "signing-keys-dir", "KJOB_SIGNING_KEYS_DIR", "", "directory with one HMAC key per file, named by key id (empty: do not sign)")
	f.String(&o.KeyID, "signing-key-id", "KJOB_SIGNING_KEY_ID", "", "id of the key to sign windows with (a file in --signing-keys-dir)")
}

// RegisterWorker adds the worker's signing flags.
func (o *SigningOptions) RegisterWorker(f *Flags) {
	f.String(&o.KeysDir, "signing-keys-dir", "KJOB_SIGNING_KEYS_DIR", "", "directory with one accepted HMAC key per file, named by key id (empty: do not verify)")
	f.Bool(&o.Required, "signatures-required", "KJOB_SIGNATURES_REQUIRED", false, "dead-letter unsigned windows (signed windows are always verified when keys are set)")
}

// Signer returns the producer's signing function, or nil if signing is
// off.
func (o SigningOptions) Signer() (func(*kgo.Record) error, error) {
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
			s, err := signing.NewSigner(k)
			if err != nil {
				return nil, err
			}
			return s.Sign, nil
		}
	}
	return nil, fmt.Errorf("--signing-key-id %q: no such file in --signing-keys-dir %q", o.KeyID, o.KeysDir)
}

// Verifier returns the worker's verification function, or nil if
// verification is off.
func (o SigningOptions) Verifier() (func(*kgo.Record) error, error) {
	if o.KeysDir == "" {
		if o.Required {
			return nil, errors.New("--signatures-required needs --signing-keys-dir with the accepted keys")
		}
		return nil, nil
	}
	keys, err := signing.LoadKeys(o.KeysDir)
	if err != nil {
		return nil, err
	}
	v, err := signing.NewVerifier(o.Required, keys...)
	if err != nil {
		return nil, err
	}
	return v.Verify, nil
}
