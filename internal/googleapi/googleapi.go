// Package googleapi is what the collectors that call Google Cloud APIs over gRPC share: how their clients connect
// (to Google, or to the simulator), and the gRPC code of a call's outcome.
package googleapi

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/api/option"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// ClientOptions connect a client with Application Default Credentials (Workload Identity on GKE) to endpoint
// (Google's when empty), or, with plaintext, to endpoint over unencrypted gRPC without credentials (the
// simulator). endpointFlag and plaintextFlag name the command's flags in the error plaintext without an endpoint
// gives.
func ClientOptions(endpoint string, plaintext bool, endpointFlag, plaintextFlag string) ([]option.ClientOption, error) {
	var opts []option.ClientOption
	if endpoint != "" {
		opts = append(opts, option.WithEndpoint(endpoint))
	}
	if plaintext {
		if endpoint == "" {
			return nil, fmt.Errorf("plaintext gRPC (%s) needs an endpoint (%s)", plaintextFlag, endpointFlag)
		}
		opts = append(opts, option.WithoutAuthentication(),
			option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	}
	return opts, nil
}

// ServiceDisabled reports whether err is Google's answer that the API is not enabled in the project: a
// PermissionDenied with reason SERVICE_DISABLED, which no role fixes.
func ServiceDisabled(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if s, ok := status.FromError(e); ok {
			if s.Code() != codes.PermissionDenied {
				return false
			}
			for _, d := range s.Details() {
				if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == "SERVICE_DISABLED" {
					return true
				}
			}
			return false
		}
	}
	return false
}

// Code is the gRPC code of a call's outcome, also for errors the client raises itself or wraps.
func Code(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	for e := err; e != nil; e = errors.Unwrap(e) {
		if s, ok := status.FromError(e); ok {
			return s.Code()
		}
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	}
	return codes.Unknown
}
