package kjob

import (
	"context"

	"github.com/kjob/kjob/internal/store/lease"
)

// Elector elects the one Producer replica that publishes, in place of the
// default lease in Redis; kubelease.New returns one that holds a
// Kubernetes Lease. Set it as ProducerConfig.Elector.
//
// Leadership is a context: Run campaigns until ctx is done, and each time
// this replica becomes the leader it calls lead with a context that is
// cancelled the moment leadership is lost (or ctx is done), then waits for
// lead to return before it gives leadership up, so that two replicas never
// publish at once while the elector works. Run returns nil once ctx is
// done and lead has returned, or an error that stops the producer.
type Elector interface {
	Run(ctx context.Context, lead func(ctx context.Context) error) error
}

// reporting runs an Elector of the user's and reports its leadership
// changes to onChange (the producer's lease metrics) as the default Redis
// lease reports its own: acquired when lead is called; lost when lead's
// context ended while Run's had not; released when Run's context ended
// (shutdown) or lead returned by itself.
type reporting struct {
	el       Elector
	holder   string
	onChange func(lease.Event)
}

// Run runs the elector, reporting around lead.
func (r reporting) Run(ctx context.Context, lead func(ctx context.Context) error) error {
	return r.el.Run(ctx, func(lctx context.Context) error {
		r.report(lease.Acquired, "acquired")
		err := lead(lctx)
		switch {
		case ctx.Err() != nil:
			r.report(lease.Released, "released on shutdown")
		case lctx.Err() != nil:
			r.report(lease.Lost, "lead's context ended: leadership lost")
		default:
			r.report(lease.Released, "lead returned")
		}
		return err
	})
}

func (r reporting) report(kind lease.EventKind, reason string) {
	r.onChange(lease.Event{Kind: kind, Record: lease.Record{Holder: r.holder}, Reason: reason})
}
