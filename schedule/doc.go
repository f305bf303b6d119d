// Package schedule reads kjob's schedules file, validates it, and computes
// job windows: the cron ticks for which the producer publishes one record
// each.
//
// # The schedules file
//
// A schedules file is YAML with a top-level "jobs:" list:
//
//	jobs:
//	  - name: report                # unique; lower-case letters, digits, '-'
//	    schedule: "30 2 * * *"      # cron spec, see below
//	    timezone: Europe/Berlin     # IANA name; default UTC
//	    handler: http               # worker handler name
//	    payload: {url: "http://127.0.0.1:8080/hook"}  # mapping, passed as JSON
//	    timeout: 30s                # per attempt; default 1m, at most 24h
//	    catchup: 10m                # publish windows missed in an outage up to this old; default 0 (only the producer's 10s misfire grace)
//	    retries: {max_attempts: 5, backoff: 2s, max_backoff: 1m}  # defaults 3, 1s, 1m; at most 100, 24h, 24h
//	    overlap: queue              # queue (default), skip, latest, replace or allow
//	    max_concurrent: 4           # allow only: windows of the job one worker runs at once; default a quarter of its concurrency
//	    enabled: true               # default true
//
// The upper bounds on timeout (24h), max_attempts (100), backoff and
// max_backoff (24h) and max_concurrent (10000) are the ones workers also
// enforce on every record. overlap says what the workers do with a window
// of the job while an earlier one of the same job still runs or waits (see
// Overlap): run them one at a time in order (queue),
// skip the newer one (skip), keep only the newest waiting one (latest),
// cancel the running one (replace), or run them concurrently (allow).
// max_concurrent (allow only) bounds how many of them one worker runs at
// once, so a job with a slow handler and many windows cannot take every
// slot from the other jobs; without it a worker allows a quarter of its
// concurrency (at least 1).
//
// Durations are Go duration strings ("90s", "1h30m"). Unknown keys, a key
// given twice, duplicate job names and an empty list are errors. Anchors,
// aliases and merge keys ("<<: *defaults") may be used to share settings;
// top-level keys starting with "x-" are ignored so that they can hold the
// anchors.
//
// Parse decodes through yaml.Node so that every problem names its line, and
// it reports all problems at once, each a *ValidationError such as
//
//	schedules.yaml:7: jobs[1].timezone: "Europe/Berln": unknown time zone; use an IANA name such as "Europe/Berlin"
//
// so a producer refuses a bad file at start-up, saying how to fix it,
// instead of misbehaving later. The time zone database is embedded
// (time/tzdata), so a file means the same on hosts without one.
//
// # Cron specs
//
// A spec has 5 fields (minute hour day-of-month month day-of-week), or 6
// with seconds first, as parsed by robfig/cron/v3; or it is one of
// "@every D", @hourly, @daily (= @midnight), @weekly, @monthly and @yearly
// (= @annually). As in Vixie cron, when both day-of-month and day-of-week
// are restricted a day matching either runs.
//
// # Windows and daylight saving
//
// A window start is an instant; [Schedule.Next] returns the first one
// strictly after a given instant, always in UTC, so window starts strictly
// increase and window ids built from them are unique even across
// daylight-saving transitions. The package never reads the clock: callers
// pass the time in, which makes it deterministic to test.
//
// The cron fields are matched in the job's time zone, with the semantics of
// ISC (Vixie) cron. robfig/cron's own runner differs: it silently skips a
// time that falls into a spring-forward gap (see robfig/cron PR #541).
//
//   - Fixed-time specs: any spec whose hour field does not match every hour,
//     such as "30 2 * * *", "0 9-17 * * 1-5", "*/15 2 * * *", @daily,
//     @weekly, @monthly, @yearly. These are evaluated on the local wall
//     clock, and each matching wall-clock time runs exactly once: a wall
//     time skipped by a spring-forward transition runs at the instant the
//     gap ends (02:30 on 2026-03-29 in Europe/Berlin runs at 03:00 CEST,
//     01:00Z), several skipped times running there as one window; a wall
//     time repeated by a fall-back transition runs only at its first
//     occurrence (02:30 on 2026-10-25 in Europe/Berlin runs at 02:30 CEST,
//     00:30Z, not again at 02:30 CET).
//   - Wildcard-hour specs: the hour field matches every hour ("*", "*/1",
//     "0-23"), such as "*/15 * * * *", "0 * * * *", "*/10 * * * * *",
//     @hourly. These follow elapsed time: they fire at every instant whose
//     local wall-clock reading matches, so in a repeated hour they fire
//     twice (once per UTC offset) and in a skipped hour not at all. An
//     hourly job thus runs every 60 minutes straight through transitions.
//   - "@every D" fires at the multiples of D since the Unix epoch
//     (1970-01-01T00:00:00Z), regardless of time zone: every producer
//     replica agrees on the window starts whenever it started. For
//     example, "@every 10s" fires at :00, :10, :20, ... of every minute.
//
// [Job.Windows] lists the windows between two instants, which is what a
// producer taking over needs to catch up on missed windows.
package schedule
