package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kjob/kjob/cmd/internal/cli"
)

const brokerUsage = `kjobdev broker: run kfake, franz-go's Kafka-compatible broker, as a process.

It speaks the Kafka protocol (transactions, consumer groups), so the producer,
the workers and any Kafka client (kcat, kafka-console-consumer) can use it.
With --data-dir it persists records and group offsets across restarts.
It is for development and tests; production uses a real Kafka cluster.

Usage: kjobdev broker [flags]`

func broker(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var listen, dataDir string
	var minSession time.Duration
	f := cli.NewFlags("kjobdev broker", brokerUsage)
	f.SetOutput(stdout)
	f.String(&listen, "listen", "KJOB_DEV_BROKER_LISTEN", "127.0.0.1:9092", "host:port to listen on")
	f.String(&dataDir, "data-dir", "KJOB_DEV_BROKER_DATA_DIR", "", "directory to persist data in (empty: memory only)")
	f.Duration(&minSession, "group-min-session-timeout", "KJOB_DEV_BROKER_GROUP_MIN_SESSION_TIMEOUT", 6*time.Second,
		"smallest consumer-group session timeout the broker accepts, as Kafka's group.min.session.timeout.ms (kjob's tests use 100ms and less against an external broker)")
	if err := f.Parse(args); err != nil {
		return err
	}
	host, portStr, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %v: want host:port such as 127.0.0.1:9092: %w", listen, err, errUsage)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return fmt.Errorf("--listen %q: port %q is not a number from 0 to 65535: %w", listen, portStr, errUsage)
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.Ports(port),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			return net.Listen(network, net.JoinHostPort(host, strconv.Itoa(port)))
		}),
	}
	if dataDir != "" {
		opts = append(opts, kfake.DataDir(dataDir))
	}
	opts = append(opts, kfake.GroupMinSessionTimeout(minSession))
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return fmt.Errorf("start broker on %s: %w", listen, err)
	}
	defer c.Close()
	fmt.Fprintf(stderr, "dev-broker: listening on %v (data dir %q); Ctrl-C stops it\n", c.ListenAddrs(), dataDir)
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	fmt.Fprintln(stderr, "dev-broker: stopping")
	return nil
}
