package worker_test

import (
	"context"
	"slices"
	"sync"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
)

// faultyDriver is a real driver whose Fetch, AckBatch, Retry and Reject
// fail on the calls the test picks, to drive the worker's error paths, and
// that records what the worker passes to Retry. It hides the wrapped
// driver's Transactor.
type faultyDriver struct {
	driver.Driver

	mu      sync.Mutex
	calls   map[string]int
	faults  map[string]map[int]error // op → call number (from 1) → error
	retries []rheo.RetryOptions      // the options of every Retry call, in order
}

func newFaultyDriver(d driver.Driver) *faultyDriver {
	return &faultyDriver{Driver: d, calls: map[string]int{}, faults: map[string]map[int]error{}}
}

// failOn makes call number n (from 1) of op fail with err.
func (f *faultyDriver) failOn(op string, n int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.faults[op] == nil {
		f.faults[op] = map[int]error{}
	}
	f.faults[op][n] = err
}

func (f *faultyDriver) fault(op string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[op]++
	return f.faults[op][f.calls[op]]
}

func (f *faultyDriver) Fetch(ctx context.Context, stream, group string, opts *rheo.FetchOptions) ([]rheo.Lease, error) {
	if err := f.fault("fetch"); err != nil {
		return nil, err
	}
	return f.Driver.Fetch(ctx, stream, group, opts)
}

func (f *faultyDriver) AckBatch(ctx context.Context, ids []string) ([]rheo.AckResult, error) {
	if err := f.fault("ack_batch"); err != nil {
		return nil, err
	}
	return f.Driver.AckBatch(ctx, ids)
}

func (f *faultyDriver) Retry(ctx context.Context, id string, opts *rheo.RetryOptions) (rheo.RetryOutcome, error) {
	f.mu.Lock()
	f.retries = append(f.retries, *opts)
	f.mu.Unlock()
	if err := f.fault("retry"); err != nil {
		return "", err
	}
	return f.Driver.Retry(ctx, id, opts)
}

// retryCalls returns the options of every Retry call so far.
func (f *faultyDriver) retryCalls() []rheo.RetryOptions {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.retries)
}

func (f *faultyDriver) Reject(ctx context.Context, id, reason string) error {
	if err := f.fault("reject"); err != nil {
		return err
	}
	return f.Driver.Reject(ctx, id, reason)
}
