package harness_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/media"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/anthropic"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/openai"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/openrouter"
)

// scriptServer answers a vendor's streaming endpoint with bodies in turn
// and keeps every request body.
type scriptServer struct {
	mu     sync.Mutex
	bodies [][]byte
	turns  []string
}

func (s *scriptServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	n := len(s.bodies)
	s.bodies = append(s.bodies, body)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	if n < len(s.turns) {
		fmt.Fprint(w, s.turns[n])
	}
}

func anthropicCall(id, name, args string) string {
	partial, _ := json.Marshal(args)
	return "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n" +
		fmt.Sprintf("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":%q,\"name\":%q,\"input\":{}}}\n\n", id, name) +
		fmt.Sprintf("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":%s}}\n\n", partial) +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":9}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
}

const anthropicDone = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"A red square.\"}}\n\n" +
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
	"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":3}}\n\n" +
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

func chatCall(id, name, args string) string {
	a, _ := json.Marshal(args)
	return fmt.Sprintf("data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":%q,\"type\":\"function\",\"function\":{\"name\":%q,\"arguments\":%s}}]},\"finish_reason\":\"tool_calls\"}]}\n\n", id, name, a) +
		"data: {\"id\":\"x\",\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":9}}\n\ndata: [DONE]\n\n"
}

const chatDone = "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"A red square.\"},\"finish_reason\":\"stop\"}]}\n\n" +
	"data: {\"id\":\"x\",\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":3}}\n\ndata: [DONE]\n\n"

func redSquare(t *testing.T) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 4, 4))
	for i := range 16 {
		img.Set(i%4, i/4, color.RGBA{255, 0, 0, 255})
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// A run on each vendor's wire format carries the image view_image read
// in the next request, in the shape the vendor documents — Anthropic:
// image blocks in the tool_result's content; Chat Completions (OpenAI,
// OpenRouter): a user message of image_url data URLs after the tool
// messages — and in that request only. A model the catalogue does not
// say takes images is sent none, and the model is told so.
func TestImagesOnEachVendorsWire(t *testing.T) {
	pic := redSquare(t)
	b64 := base64.StdEncoding.EncodeToString(pic)
	output := fmt.Sprintf("[image shot.png: image/png, 4×4 pixels, %d bytes, sha256 %s]", len(pic), media.Hash(pic))

	anthropicShape := map[string]any{"role": "user", "content": []any{map[string]any{
		"type": "tool_result", "tool_use_id": "toolu_1", "content": []any{
			map[string]any{"type": "text", "text": output},
			map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": b64}},
		}}}}
	chatShape := []any{
		map[string]any{"role": "tool", "tool_call_id": "call_1", "content": output},
		map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "text", "text": "The image returned by tool call call_1:"},
			map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:image/png;base64," + b64}},
		}},
	}
	for _, v := range []struct {
		name  string
		turns []string
		build func(url string) (provider.Provider, error)
		// shape finds the part of the second request that shows the image.
		shape func(msgs []any) any
		want  any
		takes bool
	}{
		{"anthropic", []string{anthropicCall("toolu_1", "view_image", `{"path":"shot.png"}`), anthropicCall("toolu_2", "list_dir", `{}`), anthropicDone},
			func(url string) (provider.Provider, error) {
				return anthropic.New(anthropic.Config{APIKey: "sk-ant-0123456789", Model: "claude-sonnet-4-5", BaseURL: url})
			}, func(msgs []any) any { return msgs[len(msgs)-1] }, anthropicShape, true},
		{"openai", []string{chatCall("call_1", "view_image", `{"path":"shot.png"}`), chatCall("call_2", "list_dir", `{}`), chatDone},
			func(url string) (provider.Provider, error) {
				return openai.New(openai.Config{APIKey: "sk-0123456789", Model: "gpt-4o", BaseURL: url})
			}, func(msgs []any) any { return msgs[len(msgs)-2:] }, chatShape, true},
		{"openrouter", []string{chatCall("call_1", "view_image", `{"path":"shot.png"}`), chatCall("call_2", "list_dir", `{}`), chatDone},
			func(url string) (provider.Provider, error) {
				return openrouter.New(openrouter.Config{APIKey: "sk-or-0123456789", Model: "google/gemini-3-flash-preview", BaseURL: url})
			}, func(msgs []any) any { return msgs[len(msgs)-2:] }, chatShape, true},
		{"ollama (no images)", []string{chatCall("call_1", "view_image", `{"path":"shot.png"}`), chatCall("call_2", "list_dir", `{}`), chatDone},
			func(url string) (provider.Provider, error) {
				return openai.NewCompatible(openai.Config{Model: "llama3", Preset: openai.PresetOllama, BaseURL: url})
			}, nil, nil, false},
	} {
		t.Run(v.name, func(t *testing.T) {
			srv := &scriptServer{turns: v.turns}
			hs := httptest.NewServer(srv)
			defer hs.Close()
			p, err := v.build(hs.URL)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "shot.png"), pic, 0o644)
			var events []harness.Event
			res, err := harness.Run(context.Background(), harness.TaskContract{Goal: "Describe shot.png.", Root: dir},
				harness.Options{Provider: p, ViewImage: true, Observer: func(e harness.Event) { events = append(events, e) }})
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome.Kind != harness.Finished || len(srv.bodies) != 3 {
				t.Fatalf("outcome %s after %d requests: %s", res.Outcome.Kind, len(srv.bodies), res.Outcome.Reason)
			}
			if strings.Contains(string(srv.bodies[2]), b64) {
				t.Errorf("the image was sent again in the turn after the next")
			}
			if !v.takes {
				if strings.Contains(string(srv.bodies[1]), b64) || !strings.Contains(string(srv.bodies[1]), "does not take images") {
					t.Errorf("a model that does not take images was sent: %s", srv.bodies[1])
				}
				return
			}
			var body struct {
				Messages []any `json:"messages"`
			}
			if err := json.Unmarshal(srv.bodies[1], &body); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(v.want, v.shape(body.Messages)); diff != "" {
				t.Errorf("the image in the request (-want +got):\n%s", diff)
			}
			// The trace keeps the hash and the size, not the bytes.
			var img *harness.Image
			for _, e := range events {
				if e.Kind == harness.EventImage {
					img = e.Image
				}
			}
			if img == nil || img.SHA256 != media.Hash(pic) || img.Size != len(pic) || img.Data != nil {
				t.Errorf("the image event: %+v", img)
			}
		})
	}
}
