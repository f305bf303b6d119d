package preflight

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kjob/kjob/internal/base/backoff"
	"github.com/kjob/kjob/internal/store/access"
)

// CheckKafkaAccess verifies, before a component starts, that its Kafka
// principal holds the role's grants (internal/store/access). It retries while Kafka
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
