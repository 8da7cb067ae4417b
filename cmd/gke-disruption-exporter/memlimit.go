package main

import (
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// cgroupMemoryFiles hold the container's memory limit: cgroup v2, then v1.
var cgroupMemoryFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// memoryLimitShare of the container's limit is the Go runtime's soft limit: the rest is for non-heap memory, so the
// GC works harder near the limit instead of the container being killed.
const memoryLimitShare = 0.9

// setMemoryLimit sets the Go runtime's soft memory limit from the container's when GOMEMLIMIT is unset, as the
// runtime does not read cgroups itself. Without a limit (or off Linux) it changes nothing.
func setMemoryLimit(logger *slog.Logger) {
	if _, set := os.LookupEnv("GOMEMLIMIT"); set {
		return
	}
	limit, ok := cgroupMemoryLimit(cgroupMemoryFiles)
	if !ok {
		return
	}
	soft := int64(float64(limit) * memoryLimitShare)
	debug.SetMemoryLimit(soft)
	logger.Debug("Go memory limit set from the container's", "container_limit_bytes", limit, "gomemlimit_bytes", soft)
}

// cgroupMemoryLimit reads the first of files that holds a limit; "max" and v1's huge "unlimited" value are none.
func cgroupMemoryLimit(files []string) (int64, bool) {
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		v := strings.TrimSpace(string(b))
		limit, err := strconv.ParseInt(v, 10, 64)
		if err != nil || limit <= 0 || limit >= 1<<62 {
			return 0, false
		}
		return limit, true
	}
	return 0, false
}
