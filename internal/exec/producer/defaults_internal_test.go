package producer

import (
	"context"
	"testing"

	"github.com/kjob/kjob/schedule"
)

type noElector struct{}

func (noElector) Run(ctx context.Context, _ func(context.Context) error) error {
	<-ctx.Done()
	return nil
}

// The default transactional id is derived from the namespace, as
// cmd/producer has always derived it, not from the topic: two replicas of
// one deployment, one embedding the library and one running the binary,
// share it and fence each other.
func TestDefaultNamesFromTheDeployment(t *testing.T) {
	jobs := []*schedule.Job{{Name: "a", Spec: "@every 1s", Handler: "h"}}
	for _, tc := range []struct {
		cfg                 Config
		txn, topic, stateTo string
	}{
		{Config{}, "kjob-producer-kjob", "kjob.windows", "kjob.windows.state"},
		{Config{Namespace: "prod", Topic: "w"}, "kjob-producer-prod", "w", "w.state"},
		// Topics derive from the namespace too (issue 21).
		{Config{Namespace: "prod", TransactionalID: "kjob-producer-w"}, "kjob-producer-w", "kjob.prod.windows", "kjob.prod.windows.state"},
		{Config{Namespace: "kjob"}, "kjob-producer-kjob", "kjob.windows", "kjob.windows.state"},
	} {
		cfg := tc.cfg
		cfg.Brokers, cfg.Elector, cfg.Jobs = []string{"127.0.0.1:9092"}, noElector{}, jobs
		p, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if p.cfg.TransactionalID != tc.txn || p.cfg.Topic != tc.topic || p.cfg.StateTopic != tc.stateTo {
			t.Errorf("New(%+v): transactional id %q, topics %q %q; want %q, %q, %q",
				tc.cfg, p.cfg.TransactionalID, p.cfg.Topic, p.cfg.StateTopic, tc.txn, tc.topic, tc.stateTo)
		}
	}
}
