package cloudmonitoring

import (
	"fmt"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"
)

func parse(t *testing.T, args ...string) *Flags {
	t.Helper()
	app := kingpin.New("test", "")
	cmd := app.Command("cluster", "")
	f := AddFlags(cmd)
	if _, err := app.Parse(append([]string{"cluster"}, args...)); err != nil {
		t.Fatalf("parsing %q: %v", args, err)
	}
	return f
}

func TestFlagsDefaults(t *testing.T) {
	f := parse(t)
	if f.Active() {
		t.Error("active without a project")
	}
	want := Config{Interval: time.Minute, Lookback: 5 * time.Minute, IdleTimeout: time.Hour}
	if got, err := f.Config(); err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("defaults: %+v (%v), want %+v", got, err, want)
	}
	if *f.Endpoint != "" || *f.Insecure {
		t.Errorf("endpoint %q insecure %v by default", *f.Endpoint, *f.Insecure)
	}
}

func TestFlagsRepeatable(t *testing.T) {
	f := parse(t, "--cloudmonitoring.project=p1", "--cloudmonitoring.project=p2",
		"--cloudmonitoring.cluster=train", "--cloudmonitoring.cluster=europe-west4/serve", "--cloudmonitoring.interval=30s",
		"--cloudmonitoring.lookback=10m", "--cloudmonitoring.series-idle-timeout=2h",
		"--cloudmonitoring.endpoint=127.0.0.1:9", "--cloudmonitoring.insecure")
	if !f.Active() {
		t.Error("inactive with two projects")
	}
	want := Config{Projects: []string{"p1", "p2"}, Clusters: []Cluster{{Name: "train"}, {Location: "europe-west4", Name: "serve"}},
		Interval: 30 * time.Second, Lookback: 10 * time.Minute, IdleTimeout: 2 * time.Hour}
	if got, err := f.Config(); err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("config %+v (%v), want %+v", got, err, want)
	}
	if *f.Endpoint != "127.0.0.1:9" || !*f.Insecure {
		t.Errorf("endpoint %q insecure %v", *f.Endpoint, *f.Insecure)
	}
}

func TestFlagsRejectMalformedClusters(t *testing.T) {
	for _, arg := range []string{"/train", "us-central1/", "a/b/c", "us central1/train"} {
		f := parse(t, "--cloudmonitoring.project=p1", "--cloudmonitoring.cluster="+arg)
		if cfg, err := f.Config(); err == nil {
			t.Errorf("--cloudmonitoring.cluster=%s accepted as %+v", arg, cfg.Clusters)
		}
	}
}
