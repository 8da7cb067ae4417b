package webhook

import (
	"encoding/json"
	"testing"
)

// FuzzDecode feeds arbitrary bodies to the decoder and classifier: they must never panic, every decoded alert gets
// exactly one reply, only triggers naming a node and a known action are passed on, and a decoded payload survives
// a round trip through JSON. Seeds are in testdata/fuzz/FuzzDecode.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"version":"4","status":"firing","alerts":[{"status":"firing","labels":{"gke_disruption_action":"drain","node":"n1"}}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		msg, err := Decode(body)
		if err != nil {
			return
		}
		passed := 0
		for _, a := range msg.Alerts {
			trigger, pass, res := Classify(a)
			if res.Decision != Accepted && res.Decision != Skipped {
				t.Fatalf("decision %q", res.Decision)
			}
			if pass {
				passed++
				if trigger.Node == "" || trigger.Action == "" {
					t.Fatalf("trigger without node or action passed on: %+v", trigger)
				}
			}
			if res.Decision == Accepted && (!pass || !trigger.Firing) {
				t.Fatalf("accepted alert is not a firing trigger: %+v %+v", res, trigger)
			}
		}
		if passed > len(msg.Alerts) {
			t.Fatalf("%d triggers from %d alerts", passed, len(msg.Alerts))
		}
		again, err := json.Marshal(msg)
		if err != nil {
			return // times outside JSON's range decode but do not encode
		}
		msg2, err := Decode(again)
		if err != nil {
			t.Fatalf("re-encoded payload does not decode: %v\n%s", err, again)
		}
		if len(msg2.Alerts) != len(msg.Alerts) {
			t.Fatalf("round trip changed alert count %d -> %d", len(msg.Alerts), len(msg2.Alerts))
		}
	})
}
