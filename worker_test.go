package kjob_test

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/kjob/kjob"
	"github.com/kjob/kjob/pkg/configerr"
)

// NewWorker refuses a config it cannot run with a *configerr.Error naming
// the field, and leaves nothing running behind a refusal, even one that
// comes after it built the consumer.
func TestNewWorkerRefuses(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer rdb.Close()
	brokers := []string{"127.0.0.1:1"}
	for _, tc := range []struct {
		cfg         kjob.WorkerConfig
		field, want string
	}{
		{kjob.WorkerConfig{Redis: rdb}, "WorkerConfig.Brokers", "is empty"},
		{kjob.WorkerConfig{Brokers: brokers}, "WorkerConfig.Redis", "is nil"},
		{kjob.WorkerConfig{Brokers: brokers, Redis: rdb, HTTPAllowHosts: []string{"http://x/"}}, "WorkerConfig.HTTPAllowHosts", "without scheme or port"},
		{kjob.WorkerConfig{Brokers: brokers, Redis: rdb, Namespace: "a b"}, "Config.Namespace", "contains ' '"},
		{kjob.WorkerConfig{Brokers: brokers, Redis: rdb, Grace: -1}, "Config.Grace", "is negative"},
		// Refused by the control agent, after the consumer was built.
		{kjob.WorkerConfig{Brokers: brokers, Redis: rdb, ControlTopic: "kjob.windows"}, "AgentConfig.ControlTopic", ""},
	} {
		w, err := kjob.NewWorker(tc.cfg)
		ce := configerr.As(err)
		if w != nil || ce == nil || ce.Field != tc.field || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewWorker(%+v) = %v, %v; want a *configerr.Error on %s containing %q", tc.cfg, w, err, tc.field, tc.want)
		}
	}
}
