package driver

import (
	"sort"
	"time"
)

// storyClock maps story time, which runs scale times faster, onto the wall clock from start.
type storyClock struct {
	start time.Time
	scale float64
}

// wall is the wall-clock length of a story duration.
func (c storyClock) wall(story time.Duration) time.Duration {
	return time.Duration(float64(story) / c.scale)
}

// at is the wall-clock time of a story offset from the start.
func (c storyClock) at(story time.Duration) time.Time { return c.start.Add(c.wall(story)) }

// story is the story time at a wall-clock time.
func (c storyClock) story(t time.Time) time.Duration {
	return time.Duration(float64(t.Sub(c.start)) * c.scale)
}

// timedEvent is a scenario event with its wall-clock time.
type timedEvent struct {
	at    time.Time
	index int // in the scenario, for logs
	event *Event
}

// timeline orders the scenario's events by when they happen; events at the same time keep the file's order.
func timeline(sc *Scenario, c storyClock) []timedEvent {
	out := make([]timedEvent, len(sc.Events))
	for i := range sc.Events {
		out[i] = timedEvent{at: c.at(time.Duration(sc.Events[i].At)), index: i, event: &sc.Events[i]}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].at.Before(out[b].at) })
	return out
}
