package config

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
	// Timezones must resolve in minimal container images without /usr/share/zoneinfo.
	_ "time/tzdata"

	"gopkg.in/yaml.v3"
)

// IntOrPercent is a node count ("3", 3) or a percentage of some total ("10%").
type IntOrPercent struct {
	Value   int
	Percent bool
}

// UnmarshalYAML reads a non-negative integer or an integer percentage from 0% to 100%.
func (v *IntOrPercent) UnmarshalYAML(n *yaml.Node) error {
	parsed, err := ParseIntOrPercent(n.Value)
	if err != nil {
		return err
	}
	*v = parsed
	return nil
}

// ParseIntOrPercent parses "3" or "10%".
func ParseIntOrPercent(s string) (IntOrPercent, error) {
	if p, ok := strings.CutSuffix(s, "%"); ok {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || n > 100 {
			return IntOrPercent{}, fmt.Errorf("%q is not a percentage from 0%% to 100%%", s)
		}
		return IntOrPercent{Value: n, Percent: true}, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return IntOrPercent{}, fmt.Errorf("%q is neither a count (0, 1, 2, ...) nor a percentage such as \"10%%\"", s)
	}
	return IntOrPercent{Value: n}, nil
}

func (v IntOrPercent) String() string {
	if v.Percent {
		return strconv.Itoa(v.Value) + "%"
	}
	return strconv.Itoa(v.Value)
}

// Of resolves the value against total. Percentages round down, except that a non-zero percentage of a non-empty
// total is at least 1, so "10%" of a 5-node pool still lets one node go (a zero would silently stop all work).
// With roundUp (used for minimums) percentages round up instead.
func (v IntOrPercent) Of(total int, roundUp bool) int {
	if !v.Percent {
		return v.Value
	}
	exact := float64(v.Value) * float64(total) / 100
	if roundUp {
		return int(math.Ceil(exact))
	}
	n := int(math.Floor(exact))
	if n == 0 && v.Value > 0 && total > 0 {
		n = 1
	}
	return n
}

// Duration is a Go duration string such as "90s", "10m" or "1h30m".
type Duration time.Duration

// UnmarshalYAML reads a non-negative Go duration.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	parsed, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("%q is not a duration (examples: 30s, 10m, 1h30m)", n.Value)
	}
	if parsed < 0 {
		return fmt.Errorf("%q is negative", n.Value)
	}
	*d = Duration(parsed)
	return nil
}

// Weekday is a day name: Mon..Sun or Monday..Sunday, any case.
type Weekday time.Weekday

// UnmarshalYAML reads a day name.
func (w *Weekday) UnmarshalYAML(n *yaml.Node) error {
	s := strings.ToLower(n.Value)
	for d := time.Sunday; d <= time.Saturday; d++ {
		full := strings.ToLower(d.String())
		if s == full || s == full[:3] {
			*w = Weekday(d)
			return nil
		}
	}
	return fmt.Errorf("%q is not a day of the week (Mon, Tue, Wed, Thu, Fri, Sat, Sun)", n.Value)
}

// Clock is a wall-clock time of day as minutes since midnight; "24:00" (1440) is allowed as a window end.
type Clock int

var clockPattern = regexp.MustCompile(`^([0-9]{2}):([0-9]{2})$`)

// UnmarshalYAML reads "HH:MM" from "00:00" to "24:00".
func (c *Clock) UnmarshalYAML(n *yaml.Node) error {
	m := clockPattern.FindStringSubmatch(n.Value)
	if m == nil {
		return fmt.Errorf("%q is not a time of day in HH:MM form (for example \"02:00\")", n.Value)
	}
	h, _ := strconv.Atoi(m[1])
	mm, _ := strconv.Atoi(m[2])
	if h > 24 || mm > 59 || (h == 24 && mm != 0) {
		return fmt.Errorf("%q is not a time of day from 00:00 to 24:00", n.Value)
	}
	*c = Clock(h*60 + mm)
	return nil
}

func (c Clock) String() string { return fmt.Sprintf("%02d:%02d", int(c)/60, int(c)%60) }

// Location is an IANA timezone name such as "Europe/Berlin"; empty means UTC.
type Location struct{ *time.Location }

// UnmarshalYAML loads the named timezone.
func (l *Location) UnmarshalYAML(n *yaml.Node) error {
	loc, err := LoadLocation(n.Value)
	if err != nil {
		return err
	}
	l.Location = loc
	return nil
}

// LoadLocation loads an IANA timezone; "Local" is refused because it depends on the machine the service runs on.
func LoadLocation(name string) (*time.Location, error) {
	if name == "Local" {
		return nil, errors.New(`"Local" depends on the host; name an IANA timezone such as "Europe/Berlin" or "UTC"`)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("%q is not an IANA timezone name (for example \"America/Los_Angeles\")", name)
	}
	return loc, nil
}

// Strategy is how a pool's nodes may be disrupted.
type Strategy string

const (
	// Rolling takes a few nodes at a time, within maxUnavailable and minAvailable.
	Rolling Strategy = "rolling"
	// Parallel takes the whole pool together, for coupled workloads such as multi-node training.
	Parallel Strategy = "parallel"
)

// UnmarshalYAML reads "rolling" or "parallel".
func (s *Strategy) UnmarshalYAML(n *yaml.Node) error {
	switch Strategy(n.Value) {
	case Rolling, Parallel:
		*s = Strategy(n.Value)
		return nil
	}
	return fmt.Errorf("%q is not a strategy (rolling or parallel)", n.Value)
}
