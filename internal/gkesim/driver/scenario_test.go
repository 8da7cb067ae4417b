package driver

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

func TestParseDefaults(t *testing.T) {
	sc, err := Parse([]byte(`
cluster: {project: p, location: europe-west4, name: c}
nodePools:
  - {name: a3, machineType: a3-highgpu-8g, accelerator: nvidia-h100-80gb, nodes: 2}
  - {name: tpu, machineType: ct5p-hightpu-4t, zone: europe-west4-b, tpu: {accelerator: tpu-v5p-slice, topology: 2x2x2}, nodes: 2}
workloads:
  - {name: ds, kind: DaemonSet}
  - {name: sweep, kind: Job, nodePools: [a3], nodes: [1], startAt: 30m, runFor: 6h}
events:
  - {at: 1h, maintenance: {nodePool: a3, windowStartsIn: 20h}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if sc.TimeScale != 1 || sc.GKE.MaintenanceStartDelay != Duration(60*time.Second) || sc.GKE.PreemptionNotice != Duration(30*time.Second) {
		t.Errorf("defaults not applied: scale %v, mechanics %+v", sc.TimeScale, sc.GKE)
	}
	if sc.NodePools[0].Zone != "europe-west4-a" || sc.NodePools[1].Zone != "europe-west4-b" || sc.NodePools[0].AcceleratorCount != 1 {
		t.Errorf("pools: %+v", sc.NodePools)
	}
	if !sc.NodePools[1].MultiHostTPU() || sc.NodePools[0].MultiHostTPU() {
		t.Error("only the two-node TPU pool is a multi-host slice")
	}
	if got := sc.NodePools[1].SliceHosts(); got != 2 {
		t.Errorf("2x2x2 slice of 4-chip VMs has %d hosts, want 2", got)
	}
	if w := sc.Workloads[0]; w.Namespace != "default" || w.TerminationGracePeriod != Duration(30*time.Second) {
		t.Errorf("workload: %+v", w)
	}
	if w := sc.Workloads[1]; w.StartAt != Duration(30*time.Minute) || w.RunFor != Duration(6*time.Hour) || len(w.Nodes) != 1 {
		t.Errorf("job: %+v", w)
	}
	if w := sc.Workloads[0]; w.StartAt != 0 || w.RunFor != 0 {
		t.Errorf("a workload starts at once and runs forever unless told: %+v", w)
	}
	if m := sc.Events[0].Maintenance; m.Type != "SCHEDULED" || m.WindowLength != Duration(time.Hour) {
		t.Errorf("maintenance: %+v", m)
	}
}

// TestSingleHostTPUPoolIsNoSlice: a pool of several single-host TPU VMs is maintained node by node.
func TestSingleHostTPUPoolIsNoSlice(t *testing.T) {
	sc, err := Parse([]byte(`
cluster: {project: p, location: us-central1, name: c}
nodePools:
  - {name: v5e, machineType: ct5lp-hightpu-4t, tpu: {accelerator: tpu-v5-lite-podslice, topology: 2x2, chipsPerNode: 4}, nodes: 3}
  - {name: v5e-slice, machineType: ct5lp-hightpu-4t, tpu: {accelerator: tpu-v5-lite-podslice, topology: 4x4, chipsPerNode: 4}, nodes: 4}
`))
	if err != nil {
		t.Fatal(err)
	}
	if p := sc.NodePools[0]; p.MultiHostTPU() || p.SliceHosts() != 1 {
		t.Errorf("three 2x2 v5e nodes: multi-host %v, %d hosts; want single-host", p.MultiHostTPU(), p.SliceHosts())
	}
	if p := sc.NodePools[1]; !p.MultiHostTPU() || p.SliceHosts() != 4 {
		t.Errorf("4x4 v5e slice: multi-host %v, %d hosts; want 4", p.MultiHostTPU(), p.SliceHosts())
	}
}

func TestParseRejectsBadScenarios(t *testing.T) {
	const base = "cluster: {project: p, location: us-central1, name: c}\n" +
		"nodePools:\n  - {name: gpu, machineType: g2-standard-8, nodes: 2}\n  - {name: spot, machineType: g2-standard-8, nodes: 1, spot: true}\n" +
		"  - {name: tpu, machineType: ct5p-hightpu-4t, tpu: {accelerator: tpu-v5p-slice, topology: 2x2x2}, nodes: 2}\n"
	const gpuBase = base + "  - {name: a4, machineType: a4-highgpu-8g, accelerator: nvidia-b200, acceleratorCount: 8, nodes: 4, topology: {nodesPerBlock: 2}}\n" +
		"  - {name: a2, machineType: a2-ultragpu-1g, accelerator: nvidia-a100-80gb, nodes: 1}\n"
	for name, tc := range map[string]struct{ yaml, want string }{
		"empty":            {"", "empty"},
		"unknown key":      {base + "timescale: 2\n", "field timescale not found"},
		"bad duration":     {base + "gke: {podShutdown: soon}\n", `"soon" is not a non-negative duration`},
		"negative scale":   {base + "timeScale: -1\n", "timeScale: -1 must be positive"},
		"unknown sequence": {base + "gke: {sequence: fast}\n", `gke.sequence: "fast" is not field or documented`},
		"field out of order": {base + "gke: {field: {passthrough: 30s, windowRewritten: 20s}}\n",
			"gke.field.windowRewritten: 20s comes before passthrough (30s)"},
		"no project":       {"cluster: {location: l, name: c}\nnodePools: [{name: a, machineType: m, nodes: 1}]\n", "cluster.project: required"},
		"bad cluster name": {"cluster: {project: p, location: l, name: Big}\nnodePools: [{name: a, machineType: m, nodes: 1}]\n", "cluster.name"},
		"duplicate pool":   {base + "  - {name: gpu, machineType: m, nodes: 1}\n", `nodePools[3].name: "gpu" is used twice`},
		"no nodes":         {base + "  - {name: none, machineType: m}\n", "nodePools[3].nodes: 0 is not from 1 to 1000"},
		"gpu and tpu": {base + "  - {name: x, machineType: m, nodes: 1, accelerator: a, tpu: {accelerator: t, topology: 1x1}}\n",
			"either a GPU accelerator or a TPU"},
		"tpu chips per node": {base + "  - {name: v5e, machineType: ct5lp-hightpu-8t, tpu: {accelerator: tpu-v5-lite-podslice, topology: 2x4}, nodes: 1}\n",
			`nodePools[3].machineType: "ct5lp-hightpu-8t" does not end in -4t`},
		"tpu topology": {base + "  - {name: v5e, machineType: ct5lp-hightpu-4t, tpu: {accelerator: tpu-v5-lite-podslice, topology: 2x3}, nodes: 1}\n",
			`nodePools[3].tpu.topology: "2x3" is not a whole number of 4-chip VMs`},
		"slice hosts": {base + "  - {name: v5e, machineType: ct5lp-hightpu-4t, tpu: {accelerator: tpu-v5-lite-podslice, topology: 4x4}, nodes: 2}\n",
			"nodePools[3].nodes: 2, but a 4x4 slice of 4-chip VMs has 4"},
		"unknown kind":          {base + "workloads: [{name: w, kind: StatefulSet, nodePools: [gpu]}]\n", `workloads[0].kind: "StatefulSet"`},
		"no replicas":           {base + "workloads: [{name: w, kind: Deployment, nodePools: [gpu]}]\n", "workloads[0].replicas"},
		"job replicas":          {base + "workloads: [{name: w, kind: Job, replicas: 2, nodePools: [gpu]}]\n", "only a Deployment has replicas"},
		"unknown pool":          {base + "workloads: [{name: w, kind: Job, nodePools: [cpu]}]\n", `workloads[0].nodePools[0]: "cpu" is not a node pool`},
		"both budgets":          {base + "workloads: [{name: w, kind: Deployment, replicas: 2, nodePools: [gpu], pdb: {minAvailable: 1, maxUnavailable: 1}}]\n", "exactly one of minAvailable"},
		"bad percent":           {base + "workloads: [{name: w, kind: Deployment, replicas: 2, nodePools: [gpu], pdb: {minAvailable: 120%}}]\n", `"120%" is neither a count nor a percentage`},
		"two event kinds":       {base + "events: [{at: 1h, maintenance: {nodePool: gpu}, preemption: {nodePool: spot}}]\n", "events[0]: set exactly one"},
		"no event kind":         {base + "events: [{at: 1h}]\n", "events[0]: set exactly one"},
		"node out of pool":      {base + "events: [{maintenance: {nodePool: gpu, nodes: [2]}}]\n", "events[0].maintenance.nodes[0]: node 2 is not in node pool gpu"},
		"slice nodes":           {base + "events: [{maintenance: {nodePool: tpu, nodes: [0]}}]\n", "multi-host TPU slice"},
		"bad type":              {base + "events: [{maintenance: {nodePool: gpu, type: SOON}}]\n", `"SOON" is not SCHEDULED or UNSCHEDULED`},
		"report and preemption": {base + "events: [{at: 1h, report: {nodePool: gpu}, preemption: {nodePool: spot}}]\n", "events[0]: set exactly one of maintenance, preemption, report, gpuFault, upgrade and autoUpgrade"},
		"report behavior":       {base + "events: [{report: {nodePool: gpu, behavior: melted}}]\n", `events[0].report.behavior: "melted" is not a fault behavior`},
		"report node":           {base + "events: [{report: {nodePool: gpu, nodes: [5]}}]\n", "events[0].report.nodes[0]: node 5 is not in node pool gpu"},
		"report pool":           {base + "events: [{report: {nodePool: x}}]\n", `events[0].report.nodePool: "x" is not a node pool`},
		"preempt on-demand":     {base + "events: [{preemption: {nodePool: gpu}}]\n", "not a Spot pool"},
		"event pool":            {base + "events: [{preemption: {nodePool: x}}]\n", `events[0].preemption.nodePool: "x" is not a node pool`},
		"deployment runFor": {base + "workloads: [{name: w, kind: Deployment, replicas: 1, nodePools: [gpu], runFor: 1h}]\n",
			"workloads[0].runFor: only the pods of a Job or JobSet complete; a Deployment's run until they are deleted"},
		"daemonset runFor": {base + "workloads: [{name: w, kind: DaemonSet, runFor: 1h}]\n", "workloads[0].runFor: only the pods of a Job or JobSet"},
		"bad runFor":       {base + "workloads: [{name: w, kind: Job, nodePools: [gpu], runFor: -1h}]\n", `"-1h" is not a non-negative duration`},
		"bad startAt":      {base + "workloads: [{name: w, kind: Job, nodePools: [gpu], startAt: later}]\n", `"later" is not a non-negative duration`},
		"jobset nodes":     {base + "workloads: [{name: w, kind: JobSet, nodePools: [tpu], nodes: [0]}]\n", "workloads[0].nodes: only a Job runs on chosen nodes"},
		"job node out of pool": {base + "workloads: [{name: w, kind: Job, nodePools: [gpu, spot], nodes: [1]}]\n",
			"workloads[0].nodes[0]: node 1 is not in node pool spot (nodes 0 to 0)"},
		"job node twice": {base + "workloads: [{name: w, kind: Job, nodePools: [gpu], nodes: [1, 1]}]\n", "workloads[0].nodes[1]: node 1 is listed twice"},
		"topology per block": {base + "  - {name: a4, machineType: a4-highgpu-8g, accelerator: nvidia-b200, nodes: 2, topology: {nodesPerBlock: -1}}\n",
			"nodePools[3].topology.nodesPerBlock: -1: a block holds at least one node"},
		"topology sub-blocks": {base + "  - {name: a4, machineType: a4-highgpu-8g, accelerator: nvidia-b200, nodes: 2, topology: {nodesPerBlock: 4, nodesPerSubblock: 3}}\n",
			"nodePools[3].topology.nodesPerSubblock: 3 does not divide the 4 nodes of a block into whole sub-blocks"},
		"fault and maintenance": {gpuBase + "events: [{maintenance: {nodePool: a4}, gpuFault: {nodePool: a4, xid: 79}}]\n",
			"events[0]: set exactly one of maintenance, preemption, report, gpuFault, upgrade and autoUpgrade"},
		"fault unknown key":  {gpuBase + "events: [{gpuFault: {nodePool: a4, xids: [79]}}]\n", "field xids not found"},
		"fault pool":         {gpuBase + "events: [{gpuFault: {nodePool: x, xid: 79}}]\n", `events[0].gpuFault.nodePool: "x" is not a node pool`},
		"fault without GPUs": {gpuBase + "events: [{gpuFault: {nodePool: gpu, xid: 79}}]\n", "events[0].gpuFault.nodePool: node pool gpu has no GPUs"},
		"fault xid":          {gpuBase + "events: [{gpuFault: {nodePool: a4}}]\n", "events[0].gpuFault.xid: 0 is not an Xid"},
		"fault gpu":          {gpuBase + "events: [{gpuFault: {nodePool: a4, xid: 79, gpu: 8}}]\n", "events[0].gpuFault.gpu: GPU 8 is not on the nodes of pool a4 (GPUs 0 to 7)"},
		"fault node":         {gpuBase + "events: [{gpuFault: {nodePool: a4, xid: 79, nodes: [4]}}]\n", "events[0].gpuFault.nodes[0]: node 4 is not in node pool a4"},
		"fault block range":  {gpuBase + "events: [{gpuFault: {nodePool: a4, xid: 45, block: 2}}]\n", "events[0].gpuFault.block: block 2 is not in node pool a4 (blocks 0 to 1)"},
		"fault block, nodes": {gpuBase + "events: [{gpuFault: {nodePool: a4, xid: 45, block: 0, nodes: [1]}}]\n", "events[0].gpuFault.block: set nodes or block, not both"},
		"fault no topology":  {gpuBase + "events: [{gpuFault: {nodePool: a2, xid: 45, block: 0}}]\n", "events[0].gpuFault.block: node pool a2 has no topology"},
		"companion xid":      {gpuBase + "events: [{gpuFault: {nodePool: a4, xid: 79, companions: [{xid: 154}, {xid: -3}]}}]\n", "events[0].gpuFault.companions[1].xid: -3 is not an Xid"},
		"companion gpu":      {gpuBase + "events: [{gpuFault: {nodePool: a4, xid: 79, companions: [{xid: 154, gpus: [1, 9]}]}}]\n", "events[0].gpuFault.companions[0].gpus[1]: GPU 9 is not on the nodes of pool a4"},
		"companion after":    {gpuBase + "events: [{gpuFault: {nodePool: a4, xid: 79, companions: [{xid: 154, after: -1s}]}}]\n", `"-1s" is not a non-negative duration`},
		"notice after":       {gpuBase + "events: [{gpuFault: {nodePool: a4, xid: 79, notice: {after: later}}}]\n", `"later" is not a non-negative duration`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestParseReportsEveryBadGPUFaultField: each bad field of each event is named, none hides another.
func TestParseReportsEveryBadGPUFaultField(t *testing.T) {
	_, err := Parse([]byte(`
cluster: {project: p, location: us-central1, name: c}
nodePools:
  - {name: a4, machineType: a4-highgpu-8g, accelerator: nvidia-b200, acceleratorCount: 8, nodes: 2}
events:
  - {at: 1h, gpuFault: {nodePool: a4, xid: 0, gpu: 9}}
  - {at: 2h, gpuFault: {nodePool: a4, xid: 79, nodes: [7], companions: [{xid: 154, gpus: [8]}]}}
`))
	if err == nil {
		t.Fatal("bad GPU faults accepted")
	}
	for _, want := range []string{
		"events[0].gpuFault.xid: 0 is not an Xid",
		"events[0].gpuFault.gpu: GPU 9 is not on the nodes of pool a4",
		"events[1].gpuFault.nodes[0]: node 7 is not in node pool a4",
		"events[1].gpuFault.companions[0].gpus[0]: GPU 8 is not on the nodes of pool a4",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestParseGPUFaultDefaults(t *testing.T) {
	sc, err := Parse([]byte(`
cluster: {project: p, location: us-central1, name: c}
nodePools:
  - {name: a4, machineType: a4-highgpu-8g, accelerator: nvidia-b200, acceleratorCount: 8, nodes: 4, topology: {nodesPerBlock: 2}}
events:
  - {at: 1h, gpuFault: {nodePool: a4, nodes: [0], xid: 79, gpu: 6, notice: {after: 4h}}}
  - {at: 2h, gpuFault: {nodePool: a4, block: 1, xid: 45}}
  - {at: 3h, gpuFault: {nodePool: a4, nodes: [1], xid: 79, companions: []}}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []CompanionXid{
		{Xid: 154, After: Duration(2 * time.Second)},
		{Xid: 145, GPUs: []int{7, 0, 1}, After: Duration(4 * time.Second)},
		{Xid: 45, GPUs: []int{7, 0, 1}, After: Duration(4 * time.Second)},
	}
	if got := *sc.Events[0].GPUFault.Companions; !reflect.DeepEqual(got, want) {
		t.Errorf("companions of Xid 79 on GPU 6: %+v, want the field's %+v", got, want)
	}
	if n := sc.Events[0].GPUFault.Notice; n.WindowStartsIn != Duration(168*time.Hour) || n.WindowLength != Duration(time.Hour) {
		t.Errorf("notice %+v: want the field's week out, one hour long", n)
	}
	if got := *sc.Events[1].GPUFault.Companions; len(got) != 0 || sc.Events[1].GPUFault.Notice != nil {
		t.Errorf("Xid 45: companions %+v, notice %+v; want none", got, sc.Events[1].GPUFault.Notice)
	}
	if got := *sc.Events[2].GPUFault.Companions; len(got) != 0 {
		t.Errorf("companions: [] gave %+v", got)
	}
	p := sc.Pool("a4")
	if p.Topology.NodesPerSubblock != 2 || p.Blocks() != 2 || p.Block(3) != 1 {
		t.Errorf("topology %+v: %d blocks, node 3 in block %d", p.Topology, p.Blocks(), p.Block(3))
	}
}

// TestScenarioFiles loads every scenario shipped with the simulator.
func TestScenarioFiles(t *testing.T) {
	files, err := filepath.Glob("scenarios/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenario files: %v", err)
	}
	for _, f := range files {
		if _, err := Load(f); err != nil {
			t.Error(err)
		}
	}
	if sc, err := LoadNamed("demo"); err != nil || sc.Cluster.Name != "demo" {
		t.Errorf("shipped demo scenario: %v", err)
	}
	if _, err := LoadNamed("nope"); err == nil || !strings.Contains(err.Error(), `no shipped scenario "nope"`) {
		t.Errorf("unknown scenario name: got %v", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); !os.IsNotExist(err) {
		t.Errorf("missing file: got %v", err)
	}
}

func TestNodeNamesUniqueAndGKEShaped(t *testing.T) {
	sc := &Scenario{Cluster: Cluster{Name: "prod"}, NodePools: []NodePool{{Name: "a3-train", Nodes: 1000}}}
	seen := map[string]bool{}
	for _, name := range sc.NodeNames("a3-train") {
		if seen[name] {
			t.Fatalf("%s twice", name)
		}
		seen[name] = true
		if !strings.HasPrefix(name, "gke-prod-a3-train-") || len(name) != len("gke-prod-a3-train-")+8+1+4 {
			t.Fatalf("%s is not shaped gke-CLUSTER-POOL-HASH-SUFFIX", name)
		}
	}
	if sc.NodeNames("other") != nil {
		t.Error("names for an unknown pool")
	}
}

func TestStoryClock(t *testing.T) {
	start := time.Unix(1000, 0)
	c := storyClock{start: start, scale: 288}
	if got := c.at(24 * time.Hour); !got.Equal(start.Add(5 * time.Minute)) {
		t.Errorf("24h of story at scale 288 ends at %v, want 5 minutes on", got.Sub(start))
	}
	if got := c.story(start.Add(time.Minute)); got != 288*time.Minute {
		t.Errorf("story after one minute: %v", got)
	}
	sc := &Scenario{Events: []Event{{At: Duration(2 * time.Hour)}, {At: Duration(time.Hour)}, {At: Duration(time.Hour)}}}
	tl := timeline(sc, c)
	if tl[0].index != 1 || tl[1].index != 2 || tl[2].index != 0 {
		t.Errorf("timeline order %d %d %d, want 1 2 0", tl[0].index, tl[1].index, tl[2].index)
	}
}

// TestCompletedIndexes: completion indexes are written as the Job controller writes status.completedIndexes and read
// back, whatever the order they completed in.
func TestCompletedIndexes(t *testing.T) {
	for _, tc := range []struct {
		indexes []int
		want    string
	}{
		{nil, ""},
		{[]int{0}, "0"},
		{[]int{1, 0}, "0,1"},
		{[]int{0, 1, 2}, "0-2"},
		{[]int{5, 0, 3, 4, 1, 7, 8}, "0,1,3-5,7,8"},
	} {
		set := map[int]bool{}
		for _, i := range tc.indexes {
			set[i] = true
		}
		got := formatIndexes(set)
		if got != tc.want {
			t.Errorf("%v written %q, want %q", tc.indexes, got, tc.want)
		}
		if back := formatIndexes(parseIndexes(got, 10)); back != got {
			t.Errorf("%q read back as %q", got, back)
		}
	}
	if got := formatIndexes(parseIndexes("0,2-4,x,9,3-", 4)); got != "0,2,3" {
		t.Errorf("indexes beyond the completions or malformed are dropped: got %q, want 0,2,3", got)
	}
}

// TestDemoShortensEveryMechanic: the demo plays a day in minutes, so its scenario sets each of GKE's wall-clock
// durations; one left to GKE's value (an 11-minute report operation) outlasts the story, and its work never ends
// there.
func TestDemoShortensEveryMechanic(t *testing.T) {
	data, err := builtin.ReadFile("scenarios/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		GKE map[string]any `yaml:"gke"`
	}
	if err := yaml.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	var check func(prefix string, set map[string]any, typ reflect.Type)
	check = func(prefix string, set map[string]any, typ reflect.Type) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			key := f.Tag.Get("yaml")
			switch {
			case f.Type.Kind() == reflect.Struct:
				sub, _ := set[key].(map[string]any)
				check(prefix+key+".", sub, f.Type)
			case f.Type == reflect.TypeFor[Duration]() && set[key] == nil:
				t.Errorf("the demo leaves gke.%s%s to GKE's wall-clock value", prefix, key)
			}
		}
	}
	check("", raw.GKE, reflect.TypeFor[Mechanics]())
}

// TestParseReportsEveryBadUpgradeField: each bad field of an upgrade or auto-upgrade event is named, and an upgrade
// of a pool the scenario lacks is refused.
func TestParseReportsEveryBadUpgradeField(t *testing.T) {
	_, err := Parse([]byte(`
cluster: {project: p, location: us-central1, name: c}
nodePools:
  - {name: l4, machineType: g2-standard-8, accelerator: nvidia-l4, nodes: 2}
  - {name: tpu, machineType: ct5p-hightpu-4t, tpu: {accelerator: tpu-v5p-slice, topology: 2x2x2}, nodes: 2}
events:
  - {at: 1h, upgrade: {nodePool: l4, version: latest}}
  - {at: 1h, upgrade: {nodePool: l4, version: 1.33.5-gke.1201000, strategy: ROLLING, maxSurge: 3}}
  - {at: 1h, upgrade: {nodePool: l4, version: 1.33.5-gke.1201000, strategy: BLUE_GREEN, blueGreen: {batchNodes: 3}}}
  - {at: 1h, upgrade: {nodePool: nope, version: 1.33.5-gke.1201000}}
  - {at: 1h, upgrade: {nodePool: tpu, version: 1.33.5-gke.1201000}}
  - {at: 1h, autoUpgrade: {nodePool: gone, version: "1.33"}}
  - {at: 1h, upgrade: {nodePool: l4, version: 1.33.5-gke.1201000, maxSurge: -1}}
`))
	if err == nil {
		t.Fatal("bad upgrades accepted")
	}
	for _, want := range []string{
		`events[0].upgrade.version: "latest" is not a GKE version such as 1.33.5-gke.1162000`,
		`events[1].upgrade.strategy: "ROLLING" is not SURGE or BLUE_GREEN`,
		"events[1].upgrade.maxSurge: 3 is not from 1 to the pool's nodes",
		"events[2].upgrade.blueGreen: batchNodes 3 is not from 1 to the pool's nodes",
		`events[3].upgrade.nodePool: "nope" is not a node pool of the scenario`,
		"events[4].upgrade.nodePool: node pool tpu is a multi-host TPU slice",
		`events[5].autoUpgrade.nodePool: "gone" is not a node pool of the scenario`,
		`events[5].autoUpgrade.version: "1.33" is not a GKE version`,
		"events[6].upgrade.maxSurge: -1 is not from 1",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestParseUpgradeDefaults(t *testing.T) {
	sc, err := Parse([]byte(`
cluster: {project: p, location: us-central1, name: c}
nodePools: [{name: l4, machineType: g2-standard-8, nodes: 2}]
events: [{at: 1h, upgrade: {nodePool: l4, version: 1.33.5-gke.1201000}}]
`))
	if err != nil {
		t.Fatal(err)
	}
	if u := sc.Events[0].Upgrade; u.Strategy != StrategySurge || u.MaxSurge != 1 {
		t.Errorf("upgrade defaults: strategy %q, maxSurge %d; want SURGE, 1", u.Strategy, u.MaxSurge)
	}
	if sc.GKE.DrainTimeout != Duration(time.Hour) {
		t.Errorf("drain timeout %s, want GKE's 1h", time.Duration(sc.GKE.DrainTimeout))
	}
}

// TestReplacementNodeNames: the nodes upgrades create in a pool never take a name used before in it.
func TestReplacementNodeNames(t *testing.T) {
	sc, err := Parse([]byte("cluster: {project: p, location: us-central1, name: c}\nnodePools: [{name: l4, machineType: g2-standard-8, nodes: 3}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for gen := range 4 {
		for i := range 3 {
			name := sc.ReplacementNodeName("l4", i, gen)
			if seen[name] {
				t.Fatalf("node %d of generation %d is named %s, used before", i, gen, name)
			}
			seen[name] = true
			if gen == 0 && name != sc.NodeName("l4", i) {
				t.Errorf("generation 0 of node %d is %s, want NodeName %s", i, name, sc.NodeName("l4", i))
			}
		}
	}
}

func TestParseRejectsBadFlexStartPools(t *testing.T) {
	_, err := Parse([]byte(`
cluster: {project: p, location: us-central1, name: c}
nodePools:
  - {name: long, machineType: a3-highgpu-8g, nodes: 1, maxRunDuration: 169h}
  - {name: plain, machineType: g2-standard-8, nodes: 1, replaceAtEnd: true}
  - {name: both, machineType: g2-standard-8, nodes: 1, spot: true, maxRunDuration: 24h}
`))
	if err == nil {
		t.Fatal("bad flex-start pools accepted")
	}
	for _, want := range []string{
		"nodePools[0].maxRunDuration: 169h0m0s is beyond GKE's limit of 7 days (168h)",
		"nodePools[1].replaceAtEnd: only the VMs of a flex-start pool end: set maxRunDuration",
		"nodePools[2].maxRunDuration: a pool is either flex-start or Spot, not both",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
