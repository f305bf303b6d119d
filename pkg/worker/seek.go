package worker

import "context"

// Seek moves partition n, which this worker must own, to offset and
// commits it, while the worker keeps running: the operators' replay
// (pkg/control's Agent calls it). See partition.Consumer.Seek.
func (w *Worker) Seek(ctx context.Context, n int32, offset int64) error {
	return w.consumer.Seek(ctx, n, offset)
}
