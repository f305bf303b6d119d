// Command healthcheck exits 0 if an HTTP GET of its argument answers 200,
// 1 otherwise, and 2 if it is not given one URL ("--version" prints the
// version). The distroless image has no shell, curl or wget, so
// docker compose health checks run this instead:
//
//	healthcheck http://127.0.0.1:8080/readyz
package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/kjob/kjob/internal/base/buildinfo"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "healthcheck:", err)
		if errors.Is(err, errUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

var errUsage = errors.New("usage: healthcheck URL")

func run(args []string) error {
	if len(args) == 1 && (args[0] == "--version" || args[0] == "-version") {
		fmt.Println("healthcheck", buildinfo.Version())
		return nil
	}
	if len(args) != 1 {
		return fmt.Errorf("want one URL argument, e.g. http://127.0.0.1:8080/readyz; got %d arguments: %w", len(args), errUsage)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, args[0], nil)
	if err != nil {
		return fmt.Errorf("URL %q: %w", args[0], err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s", args[0], resp.Status)
	}
	return nil
}
