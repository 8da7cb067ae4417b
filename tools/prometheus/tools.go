//go:build tools

// Package tools records the commands this module builds, so go mod tidy keeps them.
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/prometheus"
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
