package control

import (
	"errors"

	"github.com/kjob/kjob/pkg/partition"
)

func isNotOwned(err error) bool { return errors.Is(err, partition.ErrNotOwned) }
