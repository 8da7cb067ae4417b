// Package cli is the status and audit commands: what an operator reads in a terminal or a pipeline gates on. It
// reads the API server only and interprets nodes and pods with the same code as the collectors and the actions
// service.
package cli

import (
	"errors"
	"fmt"
	"net/url"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Exit codes.
const (
	// ExitFindings: audit found a finding at or above --fail-on.
	ExitFindings = 1
	// ExitAPI: the API server could not be reached, refused the credentials, or denied a read.
	ExitAPI = 2
)

// ExitError ends a command with a code; its message is one line for stderr.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// apiError turns an error reading the API server into one clear line, exit code 2.
func apiError(what string, err error) error {
	var msg string
	switch {
	case apierrors.IsForbidden(err):
		msg = fmt.Sprintf("permission denied (RBAC) %s: %v", what, err)
	case apierrors.IsUnauthorized(err):
		msg = fmt.Sprintf("unauthorized %s: the API server rejected the kubeconfig's credentials", what)
	default:
		var uerr *url.Error
		if errors.As(err, &uerr) {
			server := uerr.URL
			if u, err := url.Parse(uerr.URL); err == nil {
				server = u.Scheme + "://" + u.Host
			}
			msg = fmt.Sprintf("cannot reach the API server %s (%s): %v", server, what, uerr.Err)
		} else {
			msg = fmt.Sprintf("%s: %v", what, err)
		}
	}
	return &ExitError{Code: ExitAPI, Err: errors.New(msg)}
}
