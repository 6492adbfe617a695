package mcp

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/initorigin/io-harness-go/pkg/harness/policy"
)

func TestParseServers(t *testing.T) {
	tests := []struct {
		name, json, field string // field: "" for a valid list
	}{
		{"stdio", `[{"name":"files","command":["node","x.js"],"env":{"T":"${TOKEN}"},"cwd":"/srv","host":true}]`, ""},
		{"http", `[{"name":"gh","url":"https://api.example.com/mcp","headers":{"Authorization":"Bearer ${GH}"},"call_timeout":"5s","max_output":1024}]`, ""},
		{"unknown field", `[{"name":"a","command":["x"],"argv":["y"]}]`, "mcp_servers"},
		{"no name", `[{"command":["x"]}]`, "mcp_servers[0].name"},
		{"double underscore", `[{"name":"a__b","command":["x"]}]`, "mcp_servers[0].name"},
		{"trailing underscore", `[{"name":"a_","command":["x"]}]`, "mcp_servers[0].name"},
		{"neither", `[{"name":"a"}]`, "mcp_servers[0].command"},
		{"both", `[{"name":"a","command":["x"],"url":"http://h/"}]`, "mcp_servers[0].url"},
		{"empty program", `[{"name":"a","command":[""]}]`, "mcp_servers[0].command[0]"},
		{"relative cwd", `[{"name":"a","command":["x"],"cwd":"rel"}]`, "mcp_servers[0].cwd"},
		{"env on http", `[{"name":"a","url":"http://h/","env":{"A":"b"}}]`, "mcp_servers[0].env"},
		{"host on http", `[{"name":"a","url":"http://h/","host":true}]`, "mcp_servers[0].host"},
		{"headers on stdio", `[{"name":"a","command":["x"],"headers":{"A":"b"}}]`, "mcp_servers[0].headers"},
		{"ftp", `[{"name":"a","url":"ftp://h/"}]`, "mcp_servers[0].url"},
		{"credentials in the url", `[{"name":"a","url":"http://u:p@h/"}]`, "mcp_servers[0].url"},
		{"bad reference", `[{"name":"a","url":"http://h/","headers":{"A":"${1X}"}}]`, "mcp_servers[0].headers.A"},
		{"header injection", `[{"name":"a","url":"http://h/","headers":{"A":"x\r\nB: y"}}]`, "mcp_servers[0].headers.A"},
		{"bad protocol", `[{"name":"a","command":["x"],"protocol":"2099-01-01"}]`, "mcp_servers[0].protocol"},
		{"negative timeout", `[{"name":"a","command":["x"],"call_timeout":"-1s"}]`, "mcp_servers[0].call_timeout"},
		{"huge cap", `[{"name":"a","command":["x"],"max_output":1099511627776}]`, "mcp_servers[0].max_output"},
		{"duplicate name", `[{"name":"a","command":["x"]},{"name":"a","command":["y"]}]`, "mcp_servers[1].name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseServers([]byte(tt.json))
			var ce *ConfigError
			switch {
			case tt.field == "" && err != nil:
				t.Fatalf("ParseServers: %v", err)
			case tt.field != "" && (!errors.As(err, &ce) || ce.Field != tt.field):
				t.Fatalf("ParseServers: %v; want a *ConfigError naming %s", err, tt.field)
			}
		})
	}
}

func TestExpand(t *testing.T) {
	env := map[string]string{"A": "1", "B": "two"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	got, err := expand("x${A}-${B}$C", lookup)
	if err != nil || got != "x1-two$C" {
		t.Errorf("expand: %q, %v", got, err)
	}
	if _, err := expand("${MISSING}", lookup); err == nil || !strings.Contains(err.Error(), "MISSING is not set") {
		t.Errorf("a missing variable: %v", err)
	}
	if _, err := expand("${A}", nil); err == nil {
		t.Errorf("no lookup read a variable")
	}
}

func TestMapNames(t *testing.T) {
	got, notes := mapNames("srv", []string{"b.c", "a", "b_c", "a", "", "x/" + strings.Repeat("y", 70)})
	want := []mapping{
		{Remote: "b.c", Name: "mcp__srv__b_c_" + hashedName("", "b.c")[len("b_c_"):]},
		{Remote: "a", Name: "mcp__srv__a"},
		{Remote: "b_c", Name: "mcp__srv__b_c"},
		{Remote: "x/" + strings.Repeat("y", 70), Name: hashedName("mcp__srv__", "x/"+strings.Repeat("y", 70))},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mapNames (-want +got):\n%s", diff)
	}
	if len(notes) != 2 {
		t.Errorf("notes: %q", notes)
	}
	// The order of the list does not change the mapping.
	again, _ := mapNames("srv", []string{"x/" + strings.Repeat("y", 70), "b_c", "a", "b.c"})
	for _, m := range again {
		for _, w := range want {
			if m.Remote == w.Remote && m.Name != w.Name {
				t.Errorf("%q maps to %s in one order and %s in another", m.Remote, w.Name, m.Name)
			}
		}
	}
	for _, m := range got {
		if !validName(m.Name) {
			t.Errorf("%q is not a valid name", m.Name)
		}
	}
}

func TestNetAllow(t *testing.T) {
	p := policy.Policy{Version: 1, Defaults: policy.Defaults{Read: policy.Allow, Write: policy.Allow, Exec: policy.Allow, Net: policy.Deny},
		Layers: []policy.Layer{{Name: "l", Rules: []policy.Rule{
			{Act: policy.Net, Effect: policy.Allow, Pattern: "api.example.com:443"},
			{Act: policy.Net, Effect: policy.Allow, Pattern: "pypi.org"},
			{Act: policy.Net, Effect: policy.Allow, Pattern: "*.example.org"},
			{Act: policy.Net, Effect: policy.Allow, Pattern: "{a,b}.example.net"},
			{Act: policy.Net, Effect: policy.Allow, Pattern: "evil.example.com:443"},
			{Act: policy.Net, Effect: policy.Deny, Pattern: "evil.example.com"},
		}}}}
	got := NetAllow(p)
	if diff := cmp.Diff([]string{"api.example.com:443", "pypi.org"}, got); diff != "" {
		t.Errorf("NetAllow (-want +got):\n%s", diff)
	}
	// Without any deny or ask, a wildcard domain is kept.
	p.Layers[0].Rules = p.Layers[0].Rules[:3]
	if diff := cmp.Diff([]string{"api.example.com:443", "pypi.org", "*.example.org"}, NetAllow(p)); diff != "" {
		t.Errorf("NetAllow without a deny (-want +got):\n%s", diff)
	}
}
