package gke

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParseXids(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		want         []uint32
		wantErr      string // substring; "" means no error
	}{
		{name: "one Xid, as the device plugin writes it", reason: `{"79":true}`, want: []uint32{79}},
		{name: "several, sorted numerically", reason: `{"79":true,"119":true,"48":true}`, want: []uint32{48, 79, 119}},
		{name: "values are not read", reason: `{"64":false,"63":"yes"}`, want: []uint32{63, 64}},
		{name: "leading zeros read as the same Xid", reason: `{"079":true,"79":true}`, want: []uint32{79}},
		{name: "empty object names none", reason: `{}`},
		{name: "not JSON", reason: `79`, wantErr: "not a JSON object"},
		{name: "a JSON list", reason: `[79]`, wantErr: "not a JSON object"},
		{name: "null", reason: `null`, wantErr: "not a JSON object"},
		{name: "empty", reason: ``, wantErr: "not a JSON object"},
		{name: "truncated", reason: `{"79":tr`, wantErr: "not a JSON object"},
		{name: "a bad key drops only itself", reason: `{"79":true,"xid":true,"-1":true}`, want: []uint32{79}, wantErr: `keys ["-1" "xid"] are not Xids`},
		{name: "out of range", reason: `{"4294967296":true}`, wantErr: "are not Xids"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseXids(tc.reason)
			if !slices.Equal(got, tc.want) {
				t.Errorf("Xids %v, want %v", got, tc.want)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("unexpected error %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
			if strings.Contains(tc.wantErr, "JSON") && !errors.Is(err, ErrNotJSONObject) {
				t.Errorf("error %v does not wrap ErrNotJSONObject", err)
			}
		})
	}
}
