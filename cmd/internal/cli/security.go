package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// TLSFiles names PEM files for a TLS client: the CA bundle that verifies
// the server, and an optional client certificate and key (mutual TLS).
type TLSFiles struct {
	// CA is the CA bundle; empty uses the system roots.
	CA string
	// Cert and Key are the client certificate and its key, both or neither.
	Cert, Key string
	// ServerName overrides the name verified in the server certificate;
	// empty uses the host dialled.
	ServerName string
}

// config builds the tls.Config; prefix names the flags in errors.
func (f TLSFiles) config(prefix string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.ServerName}
	if f.CA != "" {
		pem, err := os.ReadFile(f.CA)
		if err != nil {
			return nil, fmt.Errorf("--%s-ca %q: %w", prefix, f.CA, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--%s-ca %q: no PEM certificate found; want a PEM CA bundle", prefix, f.CA)
		}
		c.RootCAs = pool
	}
	if (f.Cert == "") != (f.Key == "") {
		return nil, fmt.Errorf("--%s-cert %q and --%s-key %q: set both for mutual TLS, or neither", prefix, f.Cert, prefix, f.Key)
	}
	if f.Cert != "" {
		// Read on every handshake, so a renewed certificate (cert-manager
		// rewriting the mounted Secret) is picked up without a restart.
		if _, err := tls.LoadX509KeyPair(f.Cert, f.Key); err != nil {
			return nil, fmt.Errorf("--%s-cert %q / --%s-key %q: %w", prefix, f.Cert, prefix, f.Key, err)
		}
		cert, key := f.Cert, f.Key
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			kp, err := tls.LoadX509KeyPair(cert, key)
			if err != nil {
				return nil, fmt.Errorf("client certificate %s: %w", cert, err)
			}
			return &kp, nil
		}
	}
	return c, nil
}

func (f *TLSFiles) register(fl *Flags, prefix, envPrefix, what string) {
	fl.String(&f.CA, prefix+"-ca", envPrefix+"_CA", "", "PEM CA bundle that verifies the "+what+" server certificate (default the system roots)")
	fl.String(&f.Cert, prefix+"-cert", envPrefix+"_CERT", "", "PEM client certificate for mutual TLS with "+what+" (with --"+prefix+"-key)")
	fl.String(&f.Key, prefix+"-key", envPrefix+"_KEY", "", "PEM key of --"+prefix+"-cert")
	fl.String(&f.ServerName, prefix+"-server-name", envPrefix+"_SERVER_NAME", "", "name to verify in the "+what+" server certificate (default the host dialled)")
}

// Kafka SASL mechanisms accepted by KafkaSecurity.SASLMechanism.
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// KafkaSecurity selects how the binaries authenticate to Kafka: TLS
// (optionally mutual) and SASL PLAIN or SCRAM.
type KafkaSecurity struct {
	// TLS turns TLS on; implied by any TLSFiles field.
	TLS bool
	// TLSFiles are the CA, client certificate and key.
	TLSFiles TLSFiles
	// SASLMechanism is "", PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
	SASLMechanism string
	// SASLUser is the SASL user name.
	SASLUser string
	// SASLPassword is the password; prefer SASLPasswordFile.
	SASLPassword string
	// SASLPasswordFile holds the password (trailing newline ignored). It
	// is read at every authentication, so a rotated Secret is picked up.
	SASLPasswordFile string
}

// Register adds the Kafka security flags.
func (s *KafkaSecurity) Register(f *Flags) {
	f.Bool(&s.TLS, "kafka-tls", "KJOB_KAFKA_TLS", false, "connect to Kafka over TLS (implied by the other --kafka-tls-* flags)")
	s.TLSFiles.register(f, "kafka-tls", "KJOB_KAFKA_TLS", "Kafka")
	f.String(&s.SASLMechanism, "kafka-sasl-mechanism", "KJOB_KAFKA_SASL_MECHANISM", "", "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (empty: no SASL; use PLAIN only over TLS)")
	f.String(&s.SASLUser, "kafka-sasl-user", "KJOB_KAFKA_SASL_USER", "", "SASL user")
	f.String(&s.SASLPassword, "kafka-sasl-password", "KJOB_KAFKA_SASL_PASSWORD", "", "SASL password (prefer --kafka-sasl-password-file)")
	f.String(&s.SASLPasswordFile, "kafka-sasl-password-file", "KJOB_KAFKA_SASL_PASSWORD_FILE", "", "file holding the SASL password, re-read at each authentication")
}

// ClientOpts returns the kgo options for the configured security, or an
// error naming the flag at fault.
func (s KafkaSecurity) ClientOpts() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if s.TLS || s.TLSFiles != (TLSFiles{}) {
		c, err := s.TLSFiles.config("kafka-tls")
		if err != nil {
			return nil, err
		}
		// Verify the host dialled when no name is forced: kgo sets
		// ServerName per broker only if it is empty.
		opts = append(opts, kgo.DialTLSConfig(c))
	}
	if s.SASLMechanism == "" {
		if s.SASLUser != "" || s.SASLPassword != "" || s.SASLPasswordFile != "" {
			return nil, fmt.Errorf("--kafka-sasl-user %q is set but --kafka-sasl-mechanism is empty: set it to PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", s.SASLUser)
		}
		return opts, nil
	}
	if s.SASLUser == "" {
		return nil, fmt.Errorf("--kafka-sasl-mechanism %s needs --kafka-sasl-user", s.SASLMechanism)
	}
	if (s.SASLPassword == "") == (s.SASLPasswordFile == "") {
		return nil, fmt.Errorf("--kafka-sasl-mechanism %s needs exactly one of --kafka-sasl-password and --kafka-sasl-password-file", s.SASLMechanism)
	}
	password := func() (string, error) {
		if s.SASLPasswordFile == "" {
			return s.SASLPassword, nil
		}
		b, err := os.ReadFile(s.SASLPasswordFile)
		if err != nil {
			return "", fmt.Errorf("--kafka-sasl-password-file: %w", err)
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	}
	if _, err := password(); err != nil {
		return nil, err
	}
	user := s.SASLUser
	var mech sasl.Mechanism
	switch strings.ToUpper(s.SASLMechanism) {
	case SASLPlain:
		mech = plain.Plain(func(context.Context) (plain.Auth, error) {
			p, err := password()
			return plain.Auth{User: user, Pass: p}, err
		})
	case SASLScramSHA256, SASLScramSHA512:
		fn := func(context.Context) (scram.Auth, error) {
			p, err := password()
			return scram.Auth{User: user, Pass: p}, err
		}
		if strings.ToUpper(s.SASLMechanism) == SASLScramSHA256 {
			mech = scram.Sha256(fn)
		} else {
			mech = scram.Sha512(fn)
		}
	default:
		return nil, fmt.Errorf("--kafka-sasl-mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", s.SASLMechanism)
	}
	return append(opts, kgo.SASL(mech)), nil
}

// RedisSecurity adds to a Redis URL what does not fit in it: a CA bundle,
// a client certificate, and a password read from a file.
type RedisSecurity struct {
	// TLSFiles apply when the URL is rediss:// (or any field is set).
	TLSFiles TLSFiles
	// PasswordFile holds the ACL user's password (trailing newline
	// ignored); the user name comes from the URL (redis://user@host).
	PasswordFile string
}

func (s *RedisSecurity) register(f *Flags) {
	s.TLSFiles.register(f, "redis-tls", "KJOB_REDIS_TLS", "Redis")
	f.String(&s.PasswordFile, "redis-password-file", "KJOB_REDIS_PASSWORD_FILE", "", "file holding the Redis password of the URL's ACL user (instead of putting it in the URL)")
}

// apply sets TLS and the password on u.
func (s RedisSecurity) apply(u *redis.UniversalOptions) error {
	if s.PasswordFile != "" {
		b, err := os.ReadFile(s.PasswordFile)
		if err != nil {
			return fmt.Errorf("--redis-password-file: %w", err)
		}
		if u.Password != "" {
			return fmt.Errorf("--redis-password-file %q and a password in --redis-url: set only one", s.PasswordFile)
		}
		u.Password = strings.TrimRight(string(b), "\r\n")
	}
	if s.TLSFiles == (TLSFiles{}) {
		return nil
	}
	c, err := s.TLSFiles.config("redis-tls")
	if err != nil {
		return err
	}
	if c.ServerName == "" && len(u.Addrs) > 0 {
		if host, _, err := net.SplitHostPort(u.Addrs[0]); err == nil {
			c.ServerName = host
		}
	}
	u.TLSConfig = c
	return nil
}
