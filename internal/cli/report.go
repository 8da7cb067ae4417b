package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/alertmanager/template"

	"github.com/gke-disruption-exporter/gke-disruption-exporter/actions/webhook"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/gke"
	"github.com/gke-disruption-exporter/gke-disruption-exporter/nodeview"
)

// ExitRefused: report-faulty's request was not taken (the reply says why).
const ExitRefused = 1

// ReportAlertName names the alert report-faulty sends, in the actions service's Events and logs.
const ReportAlertName = "GKEReportFaultyHostRequested"

// ReportOptions are report-faulty's.
type ReportOptions struct {
	Node     string
	Behavior gke.FaultBehavior
	// ActionsURL is the actions service's base URL; the request goes to its webhook.
	ActionsURL string
	// Client carries the web config's authentication (basic auth, TLS).
	Client *http.Client
	// Timeout bounds the retries while the replica reached is not the leader.
	Timeout time.Duration
	// Now identifies the incident: a request made again later is a new report.
	Now time.Time
}

// ReportFaulty asks the actions service to report the node's host as faulty: it posts one firing alert, as
// Alertmanager would, so that the service's policy (supported machine type, repair budget) and its exactly-once
// record decide, and prints the service's reply. A replica that is not the leader answers 503; the request is
// sent again until the leader takes it or the timeout passes.
func ReportFaulty(ctx context.Context, out io.Writer, o ReportOptions) error {
	body, err := json.Marshal(webhook.Message{
		Data: template.Data{Receiver: "report-faulty", Status: "firing", Alerts: []template.Alert{{
			Status: "firing",
			Labels: template.KV{"alertname": ReportAlertName, webhook.LabelNode: o.Node,
				webhook.LabelAction: string(nodeview.ReportFaultyHost), webhook.LabelFaultBehavior: string(o.Behavior)},
			Annotations: template.KV{},
			StartsAt:    o.Now.UTC(),
			Fingerprint: "report-faulty/" + o.Node + "/" + nodeview.FormatTime(o.Now),
		}}, GroupLabels: template.KV{}, CommonLabels: template.KV{}, CommonAnnotations: template.KV{}},
		Version:  webhook.Version,
		GroupKey: "report-faulty",
	})
	if err != nil {
		return err
	}
	target := strings.TrimSuffix(o.ActionsURL, "/") + webhook.Path
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	for wait := 250 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		results, code, err := postReport(ctx, o.Client, target, body)
		if err != nil {
			return &ExitError{Code: ExitAPI, Err: fmt.Errorf("cannot reach the actions service at %s: %w", target, err)}
		}
		switch code {
		case http.StatusOK:
			return printDecision(out, o, results)
		case http.StatusServiceUnavailable:
			select {
			case <-ctx.Done():
				return &ExitError{Code: ExitAPI, Err: fmt.Errorf("no leader of the actions service answered at %s within %s (each replica reached said it is not the leader)", target, o.Timeout)}
			case <-time.After(wait):
			}
		case http.StatusUnauthorized, http.StatusForbidden:
			return &ExitError{Code: ExitAPI, Err: fmt.Errorf("the actions service refused the request (%d %s): give the credentials of a user named in its --webhook.users with --actions.http-config-file",
				code, http.StatusText(code))}
		default:
			return &ExitError{Code: ExitAPI, Err: fmt.Errorf("the actions service answered %d %s", code, http.StatusText(code))}
		}
	}
}

func postReport(ctx context.Context, client *http.Client, target string, body []byte) ([]webhook.Result, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, resp.StatusCode, nil
	}
	var results []webhook.Result
	if err := json.NewDecoder(resp.Body).Decode(&results); err != nil {
		return nil, 0, fmt.Errorf("the reply is not a list of decisions: %w", err)
	}
	return results, resp.StatusCode, nil
}

// printDecision prints the service's decision on the request. Accepted means taken: the service decides on the node
// as the API server shows it, and says what it did in the node's Events.
func printDecision(out io.Writer, o ReportOptions, results []webhook.Result) error {
	if len(results) != 1 {
		return &ExitError{Code: ExitAPI, Err: fmt.Errorf("the actions service answered %d decisions for one request", len(results))}
	}
	res := results[0]
	if res.Decision != webhook.Accepted {
		return &ExitError{Code: ExitRefused, Err: errors.New("request not taken: " + res.Reason)}
	}
	_, err := fmt.Fprintf(out, "report-faulty-host %s (%s) requested: the actions service reports the host once the policy allows; follow with: kubectl describe node %s\n",
		o.Node, o.Behavior, o.Node)
	return err
}
