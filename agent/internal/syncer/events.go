package syncer

import (
	"fmt"
	"strings"
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

// changed records which object changed and wakes the loop.
func (s *Syncer) changed(c source.Change) {
	s.kindsMu.Lock()
	s.kinds[c.Kind] = true
	s.batchEnded = c.Last
	c.Last = false
	s.objects.add(c)
	if s.firstEvent.IsZero() {
		s.firstEvent = time.Now()
	}
	s.kindsMu.Unlock()
	s.markDirty()
}

// takeKinds returns the kinds changed since the last call, and the
// objects (changes.String), and keeps the time of the first of those
// changes in pendingEvent if none is pending.
func (s *Syncer) takeKinds() (map[source.Kind]bool, string) {
	s.kindsMu.Lock()
	defer s.kindsMu.Unlock()
	if s.pendingEvent.IsZero() {
		s.pendingEvent = s.firstEvent
	}
	s.firstEvent = time.Time{}
	kinds := s.kinds
	s.kinds = map[source.Kind]bool{}
	return kinds, s.objects.take()
}

// maxNamed is how many changed objects the sync log line names.
const maxNamed = 3

// changes are the objects changed since the last sync: the first
// maxNamed in the order they came, and every one once, to count them.
type changes struct {
	named []source.Change
	seen  map[source.Change]struct{}
}

func (c *changes) add(ch source.Change) {
	if _, ok := c.seen[ch]; ok {
		return
	}
	if c.seen == nil {
		c.seen = map[source.Change]struct{}{}
	}
	c.seen[ch] = struct{}{}
	if len(c.named) < maxNamed {
		c.named = append(c.named, ch)
	}
}

// take returns the objects for the sync log line and forgets them:
// "Ingress default/web,Service default/web +3 more", or "" when none
// changed.
func (c *changes) take() string {
	if len(c.named) == 0 {
		return ""
	}
	var b strings.Builder
	for i, ch := range c.named {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(ch.String())
	}
	if more := len(c.seen) - len(c.named); more > 0 {
		fmt.Fprintf(&b, " +%d more", more)
	}
	c.named, c.seen = c.named[:0], nil
	return b.String()
}

// quietPeriod is how long the loop waits for more events before it
// syncs: StructureCoalesce when more than EndpointSlices changed and the
// last sync of a change ended less than MaxDelay ago (changes keep coming:
// a deploy of many objects is worth gathering), else Coalesce — a lone
// change after a quiet spell goes at once, and a burst costs at most one
// sync more than it would. Coalesce gathers the changes of one burst
// that arrive one by one (an Ingress, its Service and its EndpointSlice
// from three informers); when the last change closed a batch the source
// reported whole (source.Change.Last: the file source, which gathered
// the burst itself), there is nothing more to wait for, and no wait.
func (s *Syncer) quietPeriod() time.Duration {
	s.kindsMu.Lock()
	defer s.kindsMu.Unlock()
	coalesce := s.opts.Coalesce
	if s.batchEnded {
		coalesce = 0
	}
	if time.Since(s.lastSync) >= s.opts.MaxDelay {
		return coalesce
	}
	for kind := range s.kinds {
		if kind != source.KindEndpointSlice {
			return s.opts.StructureCoalesce
		}
	}
	return coalesce
}

func (s *Syncer) markDirty() {
	select {
	case s.dirty <- struct{}{}:
	default:
	}
}
