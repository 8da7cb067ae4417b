package testenv

import (
	"sync"
	"time"
)

// Clock is a manually advanced time source a test shares with the code under test.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock starts a clock at now.
func NewClock(now time.Time) *Clock { return &Clock{now: now} }

// Now is the clock's current time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Add advances the clock by d.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
