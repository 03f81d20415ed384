package syncer

import (
	"time"

	"github.com/restysync/restysync/agent/internal/source"
)

// The loop's events: source events mark the state dirty and say which kind
// of object changed (coalesce in syncer.go waits for a burst to end); a
// failed sync is retried with backoff.

// retry runs a failed sync again with exponential backoff, so that a push
// or reload that failed is never dropped while no new change arrives.
type retry struct {
	timer *time.Timer
	delay time.Duration
}

const (
	retryFirst = 100 * time.Millisecond
	retryMax   = 10 * time.Second
)

func newRetry() *retry {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &retry{timer: t}
}

// after arms the timer when the sync failed and disarms it when it did not.
func (r *retry) after(err error) {
	if err == nil {
		r.delay = 0
		r.timer.Stop()
		return
	}
	r.delay = min(max(2*r.delay, retryFirst), retryMax)
	r.timer.Reset(r.delay)
}

// changed records which kind of object changed and wakes the loop.
func (s *Syncer) changed(kind source.Kind) {
	s.kindsMu.Lock()
	s.kinds[kind] = true
	if s.firstEvent.IsZero() {
		s.firstEvent = time.Now()
	}
	s.kindsMu.Unlock()
	s.markDirty()
}

// takeKinds returns the kinds changed since the last call, and keeps the
// time of the first of those changes in pendingEvent if none is pending.
func (s *Syncer) takeKinds() map[source.Kind]bool {
	s.kindsMu.Lock()
	defer s.kindsMu.Unlock()
	if s.pendingEvent.IsZero() {
		s.pendingEvent = s.firstEvent
	}
	s.firstEvent = time.Time{}
	kinds := s.kinds
	s.kinds = map[source.Kind]bool{}
	return kinds
}

// quietPeriod is Coalesce while only EndpointSlices changed since the last
// sync, else StructureCoalesce.
func (s *Syncer) quietPeriod() time.Duration {
	s.kindsMu.Lock()
	defer s.kindsMu.Unlock()
	for kind := range s.kinds {
		if kind != source.KindEndpointSlice {
			return s.opts.StructureCoalesce
		}
	}
	return s.opts.Coalesce
}

func (s *Syncer) markDirty() {
	select {
	case s.dirty <- struct{}{}:
	default:
	}
}
