package preflight_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kjob/kjob/internal/exec/preflight"
	"github.com/kjob/kjob/internal/testkit/testenv"
)

// apisWithout is the current Kafka's API table less the given requests: what a
// broker that does not implement them answers to ApiVersions (kfake
// advertises and serves only what MaxVersions lists).
func apisWithout(keys ...kmsg.Key) *kversion.Versions {
	v := kversion.Stable()
	for _, k := range keys {
		v.SetMaxKeyVersion(int16(k), -1)
	}
	return v
}

func TestCheckKafkaAPIs(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		name    string
		broker  *kversion.Versions
		need    []preflight.API
		missing []string
	}{
		{"producer on a full broker", nil, preflight.ProducerAPIs, nil},
		{"worker on a full broker", nil, preflight.WorkerAPIs, nil},
		{"producer without transactions", apisWithout(kmsg.InitProducerID, kmsg.EndTxn), preflight.ProducerAPIs, []string{"InitProducerID", "EndTxn"}},
		{"producer without DescribeConfigs", apisWithout(kmsg.DescribeConfigs), preflight.ProducerAPIs, []string{"DescribeConfigs"}},
		{"worker without DescribeGroups and CreateTopics", apisWithout(kmsg.DescribeGroups, kmsg.CreateTopics), preflight.WorkerAPIs, []string{"CreateTopics", "DescribeGroups"}},
		{"worker needs no transactions", apisWithout(kmsg.InitProducerID, kmsg.EndTxn, kmsg.DescribeConfigs), preflight.WorkerAPIs, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opts []kfake.Opt
			if tc.broker != nil {
				opts = append(opts, kfake.MaxVersions(tc.broker))
			}
			brokers := testenv.Brokers(t, opts...)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := preflight.CheckKafkaAPIs(ctx, log, brokers, nil, tc.need)
			if tc.missing == nil {
				if err != nil {
					t.Fatalf("err = %v, want nil", err)
				}
				return
			}
			var me *preflight.MissingAPIError
			if !errors.Is(err, preflight.ErrMissingAPI) || !errors.As(err, &me) {
				t.Fatalf("err = %v, want a *MissingAPIError", err)
			}
			if ctx.Err() != nil {
				t.Fatal("the check waited for its deadline instead of stopping")
			}
			var got []string
			for _, a := range me.Missing {
				got = append(got, a.Name())
			}
			if strings.Join(got, ",") != strings.Join(tc.missing, ",") {
				t.Errorf("missing %v, want %v", got, tc.missing)
			}
			for _, name := range tc.missing {
				if !strings.Contains(err.Error(), name+" (key ") {
					t.Errorf("error %q does not name %s", err, name)
				}
			}
		})
	}
}

// A broker that cannot be reached is retried until the context ends, not
// reported as missing APIs.
func TestCheckKafkaAPIsRetriesUnreachable(t *testing.T) {
	addr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	err := preflight.CheckKafkaAPIs(ctx, slog.New(slog.DiscardHandler), []string{addr}, nil, preflight.ProducerAPIs)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's end", err)
	}
}
