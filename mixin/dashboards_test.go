package mixin

import (
	"regexp"
	"strings"
	"testing"
)

func TestDashboardIdentifiers(t *testing.T) {
	dashboards, _ := loadDashboards(t)
	uids := map[string]string{}
	for _, name := range sortedKeys(dashboards) {
		d := dashboards[name]
		if d.UID == "" || len(d.UID) > 40 {
			t.Errorf("%s: uid %q must be 1 to 40 characters", name, d.UID)
		}
		if other, dup := uids[d.UID]; dup {
			t.Errorf("%s and %s share uid %q", name, other, d.UID)
		}
		uids[d.UID] = name
		if d.Title == "" {
			t.Errorf("%s has no title", name)
		}
		ids := map[int]bool{}
		for _, p := range d.Panels {
			if p.ID == 0 || ids[p.ID] {
				t.Errorf("%s: panel %q has id %d, missing or not unique", name, p.Title, p.ID)
			}
			ids[p.ID] = true
			if p.Title == "" {
				t.Errorf("%s: panel %d has no title", name, p.ID)
			}
		}
	}
}

func TestDashboardLayout(t *testing.T) {
	dashboards, _ := loadDashboards(t)
	for _, name := range sortedKeys(dashboards) {
		panels := dashboards[name].Panels
		for i, p := range panels {
			g := p.GridPos
			if g.W <= 0 || g.H <= 0 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
				t.Errorf("%s: panel %q at %+v is outside the 24-column grid", name, p.Title, g)
			}
			for _, q := range panels[i+1:] {
				if g.overlaps(q.GridPos) {
					t.Errorf("%s: panels %q %+v and %q %+v overlap", name, p.Title, g, q.Title, q.GridPos)
				}
			}
		}
	}
}

// variableUse finds $name, ${name} and ${name:format}; names starting with a digit are regex groups ($1).
var variableUse = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)`)

func TestDashboardVariables(t *testing.T) {
	dashboards, raw := loadDashboards(t)
	for _, name := range sortedKeys(dashboards) {
		d := dashboards[name]
		defined := map[string]bool{}
		for _, v := range d.Templating.List {
			defined[v.Name] = true
			if v.Type == "query" && (v.Datasource == nil || v.Datasource.UID != "${datasource}") {
				t.Errorf("%s: variable %s does not query the datasource variable", name, v.Name)
			}
		}
		if !defined["datasource"] {
			t.Errorf("%s has no datasource variable", name)
		}
		for _, m := range variableUse.FindAllStringSubmatch(string(raw[name]), -1) {
			if v := m[1]; !defined[v] && !strings.HasPrefix(v, "__") {
				t.Errorf("%s uses $%s, which it does not define", name, v)
			}
		}
		for _, p := range d.Panels {
			if p.Type == "row" {
				continue
			}
			if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
				t.Errorf("%s: panel %q does not use the datasource variable", name, p.Title)
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s: panel %q has no query", name, p.Title)
			}
			for _, target := range p.Targets {
				if target.Datasource == nil || target.Datasource.UID != "${datasource}" {
					t.Errorf("%s: query %s of panel %q does not use the datasource variable", name, target.RefID, p.Title)
				}
			}
		}
	}
}

// The overlap check must catch panels that share a cell, and let neighbours touch.
func TestGridPosOverlaps(t *testing.T) {
	for _, c := range []struct {
		a, b gridPos
		want bool
	}{
		{gridPos{X: 0, Y: 0, W: 12, H: 8}, gridPos{X: 12, Y: 0, W: 12, H: 8}, false},
		{gridPos{X: 0, Y: 0, W: 12, H: 8}, gridPos{X: 0, Y: 8, W: 24, H: 1}, false},
		{gridPos{X: 0, Y: 0, W: 12, H: 8}, gridPos{X: 11, Y: 7, W: 4, H: 4}, true},
		{gridPos{X: 4, Y: 4, W: 2, H: 2}, gridPos{X: 0, Y: 0, W: 24, H: 24}, true},
	} {
		if got := c.a.overlaps(c.b); got != c.want {
			t.Errorf("%+v overlaps %+v = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}
