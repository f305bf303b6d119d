package kjob_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/kjob/kjob"
	"github.com/kjob/kjob/internal/store/signing"
)

// Signing keys are built in the root's words, with the checks of the
// binaries' --signing-keys-dir, and an empty Signer or Verifier is refused.
func TestSigningKeys(t *testing.T) {
	if kjob.MinSigningKeyBytes != signing.MinKeyBytes {
		t.Errorf("MinSigningKeyBytes = %d, the signing package accepts %d", kjob.MinSigningKeyBytes, signing.MinKeyBytes)
	}
	dir := t.TempDir()
	secret := "0123456789abcdef0123456789abcdef-test-key"
	if err := os.WriteFile(filepath.Join(dir, "k1"), []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	keys, err := kjob.LoadSigningKeys(dir)
	if err != nil || len(keys) != 1 || keys[0].ID != "k1" || string(keys[0].Secret) != secret {
		t.Fatalf("LoadSigningKeys = %+v, %v; want k1 with its secret", keys, err)
	}
	s, err := kjob.NewSigner(keys[0])
	if err != nil || s.KeyID() != "k1" {
		t.Fatalf("NewSigner = %v, %v", s, err)
	}
	v, err := kjob.NewVerifier(true, keys...)
	if err != nil || !v.Required() {
		t.Fatalf("NewVerifier = %v, %v", v, err)
	}
	if _, err := kjob.NewSigner(kjob.SigningKey{ID: "short", Secret: []byte("x")}); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Errorf("NewSigner(short secret) = %v; want an error asking for at least 32 bytes", err)
	}
	if _, err := kjob.NewVerifier(false); err == nil {
		t.Error("NewVerifier() with no keys: no error")
	}

	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer rdb.Close()
	brokers := []string{"127.0.0.1:1"}
	var ce *kjob.ConfigError
	if _, err := kjob.NewWorker(kjob.WorkerConfig{Brokers: brokers, Redis: rdb, Verifier: &kjob.Verifier{}}); !errors.As(err, &ce) || ce.Field != "WorkerConfig.Verifier" {
		t.Errorf("NewWorker(empty Verifier) = %v; want a *kjob.ConfigError on WorkerConfig.Verifier", err)
	}
	if _, err := kjob.NewProducer(kjob.ProducerConfig{Brokers: brokers, Redis: rdb, Signer: &kjob.Signer{}}); !errors.As(err, &ce) || ce.Field != "ProducerConfig.Signer" {
		t.Errorf("NewProducer(empty Signer) = %v; want a *kjob.ConfigError on ProducerConfig.Signer", err)
	}
}
