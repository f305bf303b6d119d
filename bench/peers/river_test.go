package peers

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// databaseURL is the PostgreSQL server the River benchmarks create their
// databases on.
func databaseURL() string {
	if u := os.Getenv("KJOB_PEERS_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// burstArgs is the River job of the bursts: one kind, distinct args.
type burstArgs struct {
	Job string `json:"job"`
}

func (burstArgs) Kind() string { return "burst" }

type burstWorker struct {
	river.WorkerDefaults[burstArgs]
	sleep time.Duration
	fin   *finishLine
}

func (w *burstWorker) Work(ctx context.Context, _ *river.Job[burstArgs]) error {
	err := sleepCtx(ctx, w.sleep)
	w.fin.add()
	return err
}

// BenchmarkRiver runs each workload through one River client in this
// process against its own database: the jobs (of one kind, with distinct
// args) are all inserted before the client starts.
func BenchmarkRiver(b *testing.B) {
	for _, w := range workloads {
		for _, c := range concurrencies(b, "river", w) {
			b.Run(fmt.Sprintf("%s/concurrency=%d", w.name, c), func(b *testing.B) {
				for range b.N {
					benchRiver(b, w, c)
				}
			})
		}
	}
}

// database creates a database of its own and drops it at the end.
func database(b *testing.B) (dbURL, serverVersion string) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, databaseURL())
	if err != nil {
		b.Fatalf("the River benchmarks need PostgreSQL at KJOB_PEERS_DATABASE_URL (default %s): %v", databaseURL(), err)
	}
	defer admin.Close(context.Background())
	if err := admin.QueryRow(ctx, "SHOW server_version").Scan(&serverVersion); err != nil {
		b.Fatal(err)
	}
	name := "kjob_peers_" + strconv.Itoa(os.Getpid()) + "_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		b.Fatalf("create database %s: %v", name, err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, databaseURL())
		if err != nil {
			b.Errorf("drop database %s: %v", name, err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			b.Errorf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(databaseURL())
	if err != nil {
		b.Fatal(err)
	}
	u.Path = "/" + name
	return u.String(), serverVersion
}

func benchRiver(b *testing.B, w workload, conc int) {
	b.StopTimer()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	pool, pgVersion := riverDatabase(ctx, b)

	fin := &finishLine{n: w.n}
	workers := river.NewWorkers()
	river.AddWorker(workers, &burstWorker{sleep: w.sleep, fin: fin})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: conc}},
		Workers: workers,
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		b.Fatal(err)
	}
	params := make([]river.InsertManyParams, 0, 5000)
	for i := range w.n {
		params = append(params, river.InsertManyParams{Args: burstArgs{Job: fmt.Sprintf("job-%05d", i)}, InsertOpts: &river.InsertOpts{MaxAttempts: 1}})
		if len(params) == cap(params) || i == w.n-1 {
			if _, err := client.InsertManyFast(ctx, params); err != nil {
				b.Fatalf("insert: %v", err)
			}
			params = params[:0]
		}
	}

	b.StartTimer()
	t0 := time.Now()
	if err := client.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer scancel()
		if err := client.Stop(sctx); err != nil {
			b.Errorf("stop river client: %v", err)
		}
	}()
	waitFor(b, 5*time.Minute, fmt.Sprintf("all %d handlers returned", w.n), func() (bool, error) {
		n, _ := fin.result()
		return n >= w.n, fmt.Errorf("%d of %d returned", n, w.n)
	})
	settled := waitFor(b, time.Minute, "every job completed in the database", func() (bool, error) {
		var n int
		err := pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE state = 'completed'").Scan(&n)
		return err == nil && n == w.n, fmt.Errorf("%d of %d completed (%v)", n, w.n, err)
	})
	b.StopTimer()
	_, last := fin.result()
	settings := fmt.Sprintf("River %s (riverpgxv5, pgx %s), QueueConfig.MaxWorkers %d, 1 client in the bench process, pgxpool defaults (MaxConns %d), %d jobs of one kind with distinct args inserted before the start, %s, MaxAttempts 1, defaults otherwise (FetchCooldown %v, FetchPollInterval %v), PostgreSQL %s on loopback; %s",
		version("github.com/riverqueue/river"), version("github.com/jackc/pgx/v5"), conc, pool.Config().MaxConns, w.n, w.handlerText(),
		river.FetchCooldownDefault, river.FetchPollIntervalDefault, pgVersion, machine())
	reportBurst(b, "River", w, conc, t0, last, settled, settings)
}

// riverDatabase creates a database of its own for one River run (database),
// migrates River's schema into it and returns a pool on it, closed when b
// ends, and the server's version.
func riverDatabase(ctx context.Context, b *testing.B) (*pgxpool.Pool, string) {
	b.Helper()
	dbURL, pgVersion := database(b)
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		b.Fatalf("river migrations: %v", err)
	}
	return pool, pgVersion
}
