package main

import (
	"strings"

	"github.com/kjob/kjob"
	"github.com/kjob/kjob/cmd/internal/cli"
	"github.com/kjob/kjob/internal/exec/handler/builtin"
	"github.com/kjob/kjob/internal/exec/worker"
	"github.com/kjob/kjob/internal/store/dedupe"
)

// check refuses settings that would break the guarantee, before anything
// is built, in the words of the command line: the flag, its variable, the
// value and the fix. NewWorker refuses them too, in the library's words.
func check(f *cli.Flags, c kjob.WorkerConfig) error {
	extend := c.ClaimExtendInterval
	switch {
	case c.Grace <= 0:
		// The library reads 0 as its default; on the command line 0 reads
		// as "no grace", so it is refused rather than silently made 10s.
		return f.Errorf("grace", "must be positive: in-flight handlers get this long to finish on shutdown or revoke before they are abandoned and their windows run again elsewhere; set a duration such as %v (the default)", worker.DefaultGrace)
	case c.ClaimTTL < dedupe.MinClaimTTL:
		return f.Errorf("claim-ttl", "below the minimum %v: set at least %v (a few seconds in production)", dedupe.MinClaimTTL, dedupe.MinClaimTTL)
	case extend < 0:
		return f.Errorf("claim-extend", "negative: set a duration below --claim-ttl/2, or 0 for claim-ttl/3")
	case extend >= c.ClaimTTL/2:
		return f.Errorf("claim-extend", "must be less than --claim-ttl/2 (%v; %s), or claims expire while their handlers run and another worker may run the same window: lower --claim-extend (0 picks claim-ttl/3) or raise --claim-ttl",
			c.ClaimTTL/2, f.Ref("claim-ttl"))
	case c.Retention > 0 && c.Retention < c.ClaimTTL:
		return f.Errorf("retention", "shorter than %s: done markers must outlive claims; set at least the claim TTL (7 days is customary: it is the replay horizon)", f.Ref("claim-ttl"))
	case c.HeartbeatInterval > 0 && c.SessionTimeout > 0 && c.HeartbeatInterval >= c.SessionTimeout:
		return f.Errorf("heartbeat", "must be below %s: set about a third of the session timeout (%v)", f.Ref("session-timeout"), c.SessionTimeout/3)
	}
	if _, err := builtin.ParseAllowList(strings.Join(c.HTTPAllowHosts, ",")); err != nil {
		return f.Errorf("http-allow-hosts", "%v", err)
	}
	return nil
}

// libraryFields names the flag of each library field a refusal of
// NewWorker may name.
var libraryFields = map[string]string{
	"Config.Namespace": "namespace", "Config.ClaimTTL": "claim-ttl", "Config.Retention": "retention", "WorkerConfig.HTTPAllowHosts": "http-allow-hosts",
	"Config.Brokers": "brokers", "Config.Topic": "topic", "Config.Group": "group", "Config.DeadLetterTopic": "dlq-topic",
	"Config.WorkerID": "id", "Config.Grace": "grace", "Config.ClaimExtendInterval": "claim-extend",
	"Config.Concurrency": "concurrency", "Config.MaxUncommitted": "max-uncommitted", "Config.StallAfter": "stall-after",
	"Config.SessionTimeout": "session-timeout", "Config.HeartbeatInterval": "heartbeat",
	"AgentConfig.ControlTopic": "control-topic", "AgentConfig.Topic": "topic", "AgentConfig.Group": "group",
}
