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
//	    schedule: "30 2 * * *"      # cron spec, see below; or at: for a one-shot job
//	    start: "2026-12-01T00:00:00"  # no window before (local time in timezone, or RFC 3339); default none
//	    end: "2027-12-31T23:59:59"    # no window after; default none
//	    jitter: 30s                 # publish each window up to this much late; default 0, at most 24h
//	    timezone: Europe/Berlin     # IANA name; default UTC
//	    handler: http               # worker handler name
//	    payload: {url: "http://127.0.0.1:8080/hook"}  # mapping, passed as JSON
//	    timeout: 30s                # per attempt; default 1m, at most 24h
//	    catchup: 10m                # publish windows missed in an outage up to this old; default 0 (only the producer's 10s misfire grace)
//	    retries: {max_attempts: 5, backoff: 2s, max_backoff: 1m}  # defaults 3, 1s, 1m; at most 100, 24h, 24h
//	    overlap: allow              # queue (default), skip, latest, replace or allow
//	    max_concurrent: 4           # allow only: windows of the job one worker runs at once; default a quarter of its concurrency
//	    enabled: true               # default true
//	  - name: welcome-4711
//	    at: "2026-12-01T08:00:00+01:00"  # a one-shot job: exactly one window, at this instant
//	    handler: http
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
// A job has exactly one of schedule and at. at, start and end are RFC 3339
// times with an offset ("2026-12-01T08:00:00+01:00", "...Z"), or a local
// date and time ("2026-12-01T08:00:00") read in the job's time zone, a
// wall time skipped by a spring-forward transition meaning the instant the
// gap ends and a repeated one its first occurrence, as for cron specs.
// start and end are inclusive and bound a cron job only (with at they are
// an error); end before start is an error.
//
// jitter spreads the windows of jobs due at the same instant: the producer
// publishes a window [Job.Offset] after its nominal start, an offset in
// [0, jitter) derived from a hash of the job's name and the nominal start,
// and less than the time to the job's next window. Every replica and
// every replay computes the same offset; the window's identity (its id,
// its start) stays the nominal start.
//
// These fields follow Temporal Schedules: start and end are its
// ScheduleSpec StartAt and EndAt (inclusive), jitter its Jitter (Temporal
// derives the offset from the nominal time alone; kjob adds the job's
// name, so that jobs due together spread), and at is what Temporal
// expresses as a calendar spec matching a single instant (or a workflow
// start delay).
//
// The same job travels outside a file as a [Spec]. [Spec.Job] validates
// it exactly as Parse validates a file's entry (the same checks and
// messages, fields named "timezone" rather than "jobs[0].timezone"), and
// [Job.ToSpec] gives a job's canonical Spec: defaults left out, durations
// and times written one way, the payload compact with sorted keys, so
// that its JSON is deterministic and can be hashed. [CheckName] checks a
// job name given alone.
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
