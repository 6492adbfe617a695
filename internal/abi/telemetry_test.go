package abi

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// collector counts the run spans a real OTLP/HTTP receiver decodes.
type collector struct {
	mu   sync.Mutex
	runs []string // gen_ai.agent.id of every invoke_agent span
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	data, _ := io.ReadAll(r.Body)
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(data, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				if strings.HasPrefix(s.Name, "invoke_agent") {
					for _, kv := range s.Attributes {
						if kv.Key == "gen_ai.agent.id" {
							c.runs = append(c.runs, kv.Value.GetStringValue())
						}
					}
				}
			}
		}
	}
	c.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Write(out)
}

// A spec's telemetry, or the OTEL_EXPORTER_OTLP_* variables of a harness
// that reads the environment, exports the run; a harness that does not
// read the environment exports nothing on the variables' word, and closing
// the harness sends what is queued.
func TestTelemetryFromSpecAndEnvironment(t *testing.T) {
	c := &collector{}
	srv := httptest.NewServer(c)
	defer srv.Close()
	data, err := os.ReadFile(filepath.Join("testdata", "fixtures", "success", "spec.json"))
	if err != nil {
		t.Fatal(err)
	}
	spec := func(telemetry string) json.RawMessage {
		ws, _ := json.Marshal(t.TempDir())
		s := strings.ReplaceAll(string(data), `"$WORKSPACE"`, string(ws))
		if telemetry != "" {
			s = strings.Replace(s, "{", `{"telemetry":`+telemetry+",", 1)
		}
		return json.RawMessage(s)
	}
	env := func(k string) (string, bool) {
		if k == "OTEL_EXPORTER_OTLP_ENDPOINT" {
			return srv.URL, true
		}
		return "", false
	}
	for _, tc := range []struct {
		name      string
		useEnv    bool
		telemetry string
		exported  bool
	}{
		{"spec", false, `{"endpoint":"` + srv.URL + `"}`, true},
		{"environment", true, "", true},
		{"environment not read", false, "", false},
		{"disabled in the spec", true, `{"disabled":true}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := New(&Options{LookupEnv: env})
			h := handleOf(t, call(t, a, "harness.open", map[string]any{"store": ":memory:", "use_environment": tc.useEnv}), "harness")
			res := call(t, a, "run.start", map[string]any{"harness": h, "spec": spec(tc.telemetry)})
			runID := res["run_id"].(string)
			newHost(t, a, h).wait(handleOf(t, res, "run"))
			if st := a.Close(h, hangGuard); st != StatusOK {
				t.Fatalf("close: %d", st)
			}
			c.mu.Lock()
			got := strings.Contains(strings.Join(c.runs, " "), runID)
			c.mu.Unlock()
			if got != tc.exported {
				t.Errorf("exported %v, want %v", got, tc.exported)
			}
		})
	}
	// A telemetry setting the exporter cannot use is the spec's error.
	a := New(nil)
	h := openMemory(t, a)
	if e := callErr(t, a, "run.start", map[string]any{"harness": h, "spec": spec(`{"endpoint":"c:4318"}`)}); e.Code != CodeInvalidArgument || e.Details["field"] != "spec.telemetry" {
		t.Errorf("%+v", e)
	}
	if e := callErr(t, a, "run.start", map[string]any{"harness": h, "spec": spec(`{"protocol":"http/json"}`)}); e.Code != CodeInvalidArgument || e.Details["field"] != "spec.telemetry.protocol" {
		t.Errorf("%+v", e)
	}
}
