package configerr_test

import (
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/kjob/kjob/internal/base/configerr"
	"github.com/kjob/kjob/internal/store/dedupe"
)

// A program that reads its settings from its own flags names the flag a
// refused field came from.
func ExampleError() {
	_, err := dedupe.New(nil, dedupe.Config{Namespace: "prod"})
	fmt.Println(err)
	_, err = dedupe.New(redis.NewClient(&redis.Options{}), dedupe.Config{})
	var ce *configerr.Error
	if errors.As(err, &ce) && ce.Field == "Config.Namespace" {
		fmt.Println(ce.Message(func(field string) (string, bool) { return "--namespace", field == "Config.Namespace" }))
	}
	// Output:
	// dedupe: New: client is nil; pass a redis.UniversalClient, e.g. redis.NewClient(opts)
	// dedupe: --namespace is empty; set it to the deployment's name, e.g. "prod" (letters, digits, '_', '.', '-')
}
