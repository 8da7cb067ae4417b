// Package dcgm simulates NVIDIA's dcgm-exporter on one GPU node: its /metrics in the exposition dcgm-exporter
// renders, with the series GPU fault handling reads. DCGM_FI_DEV_XID_ERRORS is the last Xid of each GPU, sticky until
// the exporter restarts, with err_code (the Xid) and err_msg (its name in NVIDIA's Xid catalog);
// DCGM_EXP_XID_ERRORS_COUNT counts each GPU's Xids within a window (the exporter's --xid-count-window-size, 5 min by
// default), one series per Xid, and a zero series without xid when there was none; DCGM_FI_DEV_ROW_REMAP_FAILURE says
// whether row remapping failed since the pod started. Every series carries the GPU's identity (gpu, UUID, pci_bus_id, device, modelName),
// Hostname (the node) and the driver version, in dcgm-exporter's label order.
//
// One Exporter is one node's DaemonSet pod: serve each on its own listener, as Prometheus scrapes the pods one by
// one. The pod runs only while the node does (Stop, Restart): a restart forgets every Xid, as the real exporter does
// when its pod is recreated with the node's new boot.
package dcgm

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"
)

// DefaultXidCountWindow is dcgm-exporter's default --xid-count-window-size.
const DefaultXidCountWindow = 5 * time.Minute

// DriverVersion is the NVIDIA driver the simulated nodes run (label DCGM_FI_DRIVER_VERSION).
const DriverVersion = "570.172.08"

// GPU is one GPU as dcgm-exporter names it.
type GPU struct {
	Index    int
	UUID     string // GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx
	PCIBusID string // 00000000:04:00.0
}

// Exporter is the dcgm-exporter of one node.
type Exporter struct {
	hostname, model string
	gpus            []GPU
	window          time.Duration
	now             func() time.Time

	mu      sync.Mutex
	running bool
	// last is each GPU's last Xid (0: none since the exporter started), logged its Xids with their times.
	last   []int
	logged [][]loggedXid
	// remapFailed are the GPUs whose memory failed to remap a row.
	remapFailed []bool
}

type loggedXid struct {
	xid int
	at  time.Time
}

// New is the exporter of node hostname with count GPUs of model (as nvidia-smi names it, e.g. "NVIDIA B200"),
// running. A zero window takes DefaultXidCountWindow.
func New(hostname, model string, count int, window time.Duration) *Exporter {
	if window <= 0 {
		window = DefaultXidCountWindow
	}
	e := &Exporter{model: model, window: window, now: time.Now, gpus: make([]GPU, count),
		last: make([]int, count), logged: make([][]loggedXid, count), remapFailed: make([]bool, count)}
	e.Replace(hostname)
	return e
}

// Replace makes the exporter the one of a new node, hostname, created in place of the one before (a node pool
// upgrade's new node on the same endpoint): its GPUs' identities, running, no Xid logged.
func (e *Exporter) Replace(hostname string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.hostname, e.running = hostname, true
	for i := range e.gpus {
		e.gpus[i] = GPU{Index: i, UUID: gpuUUID(hostname, i), PCIBusID: pciBusID(i)}
		e.last[i], e.logged[i], e.remapFailed[i] = 0, nil, false
	}
}

// gpuUUID is a stable GPU UUID for the node's GPU i, shaped as NVML prints them.
func gpuUUID(hostname string, i int) string {
	h := sha256.Sum256([]byte(hostname + "/gpu/" + strconv.Itoa(i)))
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// pciBusID spreads the GPUs over buses as on an 8-GPU host, two per PCIe switch.
func pciBusID(i int) string {
	return fmt.Sprintf("00000000:%02X:00.0", 0x04+(i/2)*0x40+(i%2)*0x04)
}

// LogXid records that GPU gpu logged xid, as DCGM's Xid field shows it.
func (e *Exporter) LogXid(gpu, xid int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if gpu < 0 || gpu >= len(e.gpus) || !e.running {
		return
	}
	e.last[gpu] = xid
	e.logged[gpu] = append(e.logged[gpu], loggedXid{xid: xid, at: e.now()})
}

// FailRowRemap records that GPU gpu's memory failed to remap a row.
func (e *Exporter) FailRowRemap(gpu int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if gpu >= 0 && gpu < len(e.gpus) && e.running {
		e.remapFailed[gpu] = true
	}
}

// Stop stops the pod with its node: scrapes fail until Restart.
func (e *Exporter) Stop() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.running = false
}

// Restart starts a new pod after the node's new boot: every Xid is forgotten and row remapping works again (a
// boot after a repair is on healthy hardware; after a plain reboot the driver retries the remap).
func (e *Exporter) Restart() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.running = true
	for i := range e.gpus {
		e.last[i], e.logged[i], e.remapFailed[i] = 0, nil, false
	}
}

// Resume serves again after the node's new boot with what the exporter showed before: DCGM's host engine kept its
// state (a fault lingering after its repair).
func (e *Exporter) Resume() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.running = true
}

// LastXid is the value DCGM_FI_DEV_XID_ERRORS shows for GPU gpu.
func (e *Exporter) LastXid(gpu int) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if gpu < 0 || gpu >= len(e.gpus) {
		return 0
	}
	return e.last[gpu]
}

// ServeHTTP serves /metrics in the text exposition format; 503 while the node is down (no pod answers).
func (e *Exporter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/metrics" {
		http.NotFound(w, r)
		return
	}
	families, ok := e.families()
	if !ok {
		http.Error(w, "dcgm-exporter is not running: its node is down", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	for _, mf := range families {
		if _, err := expfmt.MetricFamilyToText(w, mf); err != nil {
			return // the scraper went away
		}
	}
}

// Serve serves the exporter on l until ctx ends.
func (e *Exporter) Serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{Handler: e, ReadHeaderTimeout: 10 * time.Second}
	stop := context.AfterFunc(ctx, func() { srv.Close() })
	defer stop()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// families are the metric families of one scrape, in dcgm-exporter's order of its counters file.
func (e *Exporter) families() ([]*dto.MetricFamily, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.running {
		return nil, false
	}
	xids := family("DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.")
	remap := family("DCGM_FI_DEV_ROW_REMAP_FAILURE", "Whether remapping of rows has failed")
	count := family("DCGM_EXP_XID_ERRORS_COUNT",
		"Count of XID Errors within user-specified time window (see xid-count-window-size param).")
	windowMS := strconv.FormatInt(e.window.Milliseconds(), 10)
	since := e.now().Add(-e.window)
	for i, gpu := range e.gpus {
		xids.Metric = append(xids.Metric, gauge(float64(e.last[i]), e.labels(gpu,
			"err_code", strconv.Itoa(e.last[i]), "err_msg", XidName(e.last[i]))...))
		remap.Metric = append(remap.Metric, gauge(boolValue(e.remapFailed[i]), e.labels(gpu)...))
		counts := map[int]int{}
		var order []int
		for _, l := range e.logged[i] {
			if l.at.Before(since) {
				continue
			}
			if counts[l.xid] == 0 {
				order = append(order, l.xid)
			}
			counts[l.xid]++
		}
		if len(order) == 0 {
			count.Metric = append(count.Metric, gauge(0, e.labels(gpu, "window_size_in_ms", windowMS)...))
		}
		for _, xid := range order {
			count.Metric = append(count.Metric, gauge(float64(counts[xid]),
				e.labels(gpu, "window_size_in_ms", windowMS, "xid", strconv.Itoa(xid))...))
		}
	}
	return []*dto.MetricFamily{xids, remap, count}, true
}

// labels are a series' labels in dcgm-exporter's order: the GPU's identity, Hostname, the label counters (the
// driver version), then the field's own attributes (extra, name-value pairs).
func (e *Exporter) labels(gpu GPU, extra ...string) []*dto.LabelPair {
	pairs := []string{
		"gpu", strconv.Itoa(gpu.Index),
		"UUID", gpu.UUID,
		"pci_bus_id", gpu.PCIBusID,
		"device", "nvidia" + strconv.Itoa(gpu.Index),
		"modelName", e.model,
		"Hostname", e.hostname,
		"DCGM_FI_DRIVER_VERSION", DriverVersion,
	}
	pairs = append(pairs, extra...)
	out := make([]*dto.LabelPair, 0, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, &dto.LabelPair{Name: proto.String(pairs[i]), Value: proto.String(pairs[i+1])})
	}
	return out
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func family(name, help string) *dto.MetricFamily {
	return &dto.MetricFamily{Name: proto.String(name), Help: proto.String(help), Type: dto.MetricType_GAUGE.Enum()}
}

func gauge(v float64, labels ...*dto.LabelPair) *dto.Metric {
	return &dto.Metric{Label: labels, Gauge: &dto.Gauge{Value: proto.Float64(v)}}
}

// XidName is an Xid's name in NVIDIA's Xid catalog, as dcgm-exporter's err_msg gives it, for the Xids GPU fault
// handling meets; "Unknown Error" for the others, as dcgm-exporter says of codes it does not know.
func XidName(xid int) string {
	if name, ok := xidNames[xid]; ok {
		return name
	}
	return "Unknown Error"
}

var xidNames = map[int]string{
	0:   "No Error",
	13:  "Graphics Engine Exception",
	31:  "GPU memory page fault",
	43:  "GPU stopped processing",
	45:  "Preemptive cleanup, due to previous errors -- Most likely to see when running multiple cuda",
	48:  "Double Bit ECC Error",
	63:  "ECC page retirement or row remapping recording event",
	64:  "ECC page retirement or row remapper recording failure",
	74:  "NVLINK Error",
	79:  "GPU has fallen off the bus",
	92:  "High single-bit ECC error rate",
	94:  "Contained ECC error",
	95:  "Uncontained ECC error",
	119: "GSP RPC Timeout",
	120: "GSP Error",
	123: "SPI PMU RPC Write Failure",
	136: "ALI Training Fail",
	140: "Unrecovered ECC Error",
	143: "GPU Initialization Failure",
	144: "NVLINK: Saw Error",
	145: "NVLINK: RLW Error",
	146: "NVLINK: TLW Error",
	147: "NVLINK: TREX Error",
	148: "NVLINK: NVLPW_CTRL Error",
	149: "NVLINK: NETIR Error",
	150: "NVLINK: MSE Error",
	154: "GPU Recovery Action Changed",
}

// ModelName is the GPU's name as NVML reports it for a GKE accelerator label (cloud.google.com/gke-accelerator).
func ModelName(accelerator string) string {
	if name, ok := modelNames[accelerator]; ok {
		return name
	}
	return accelerator
}

var modelNames = map[string]string{
	"nvidia-b200":           "NVIDIA B200",
	"nvidia-gb200":          "NVIDIA GB200",
	"nvidia-h200-141gb":     "NVIDIA H200",
	"nvidia-h100-mega-80gb": "NVIDIA H100 80GB HBM3",
	"nvidia-h100-80gb":      "NVIDIA H100 80GB HBM3",
	"nvidia-a100-80gb":      "NVIDIA A100-SXM4-80GB",
	"nvidia-tesla-a100":     "NVIDIA A100-SXM4-40GB",
	"nvidia-l4":             "NVIDIA L4",
	"nvidia-tesla-t4":       "Tesla T4",
}
