package kjob

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// The default actor is the SASL user the client authenticates as.
func TestScheduleActorIsTheSASLUser(t *testing.T) {
	seed := kgo.SeedBrokers("127.0.0.1:9092")
	for _, tc := range []struct {
		opts []kgo.Opt
		want string
	}{
		{[]kgo.Opt{seed, kgo.SASL(plain.Auth{User: "svc-billing", Pass: "pw"}.AsMechanism())}, "svc-billing"},
		{[]kgo.Opt{seed, kgo.SASL(scram.Auth{User: "alice,=x", Pass: "pw"}.AsSha256Mechanism())}, "alice,=x"},
		{[]kgo.Opt{seed, kgo.SASL(scram.Auth{User: "bob", Pass: "pw"}.AsSha512Mechanism())}, "bob"},
	} {
		got, err := saslActor(tc.opts)
		if err != nil || got != tc.want {
			t.Errorf("actor %q, %v; want %q", got, err, tc.want)
		}
	}
	got, err := saslActor([]kgo.Opt{seed})
	if err != nil || !strings.HasPrefix(got, "unauthenticated:") || !strings.Contains(got, "@") {
		t.Errorf("without SASL: %q, %v; want unauthenticated:<os user>@<host>", got, err)
	}
	s, err := NewSchedules(SchedulesConfig{Brokers: []string{"127.0.0.1:9092"}, KafkaOpts: []kgo.Opt{kgo.SASL(plain.Auth{User: "svc", Pass: "pw"}.AsMechanism())}})
	if err != nil || s.c.Actor() != "svc" {
		t.Fatalf("NewSchedules with SASL PLAIN: %v", err)
	}
	if s, err := NewSchedules(SchedulesConfig{Brokers: []string{"127.0.0.1:9092"}, Actor: "dash:alice"}); err != nil || s.c.Actor() != "dash:alice" {
		t.Fatalf("an explicit actor: %v", err)
	}
}

type tokenMechanism struct{}

func (tokenMechanism) Name() string { return "OAUTHBEARER" }
func (tokenMechanism) Authenticate(context.Context, string) (sasl.Session, []byte, error) {
	return nil, []byte("n,,\x01auth=Bearer t\x01\x01"), nil
}

// A mechanism whose first message does not name the principal needs
// SchedulesConfig.Actor: NewSchedules says so instead of guessing.
func TestScheduleActorOfAnotherMechanismMustBeSet(t *testing.T) {
	opts := []kgo.Opt{kgo.SASL(tokenMechanism{})}
	_, err := NewSchedules(SchedulesConfig{Brokers: []string{"127.0.0.1:9092"}, KafkaOpts: opts})
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Field != "SchedulesConfig.Actor" || !strings.Contains(err.Error(), "OAUTHBEARER") {
		t.Fatalf("OAUTHBEARER without Actor: %v", err)
	}
	t.Log(err)
	if _, err := NewSchedules(SchedulesConfig{Brokers: []string{"127.0.0.1:9092"}, KafkaOpts: opts, Actor: "svc-reports"}); err != nil {
		t.Fatalf("with Actor set: %v", err)
	}
}
