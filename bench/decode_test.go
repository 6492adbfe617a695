// The decoder benchmarks compare the harness's streaming decoders with
// the official SDKs' on the recorded provider streams: decode throughput
// (MB/s) and allocations, both arms in one run.
//
//	cd bench && go test -run=^$ -bench='Decode|Ratio' -benchmem
//
// BenchmarkDecode measures each arm alone. BenchmarkRatio alternates the
// arms in one loop, so that both see the same machine state, and reports
// ours/sdk ratios of time and allocations (below 1 means ours is faster,
// or allocates less).

package bench

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	anthropicsdk "github.com/anthropics/anthropic-sdk-go/v2"
	anthropicsse "github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"
	openaisdk "github.com/openai/openai-go/v3"
	openaisse "github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/initorigin/io-harness-go/pkg/harness/provider/anthropic"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/openai"
)

// fixtureDir returns shared/fixtures/providers beside the repository, or
// skips tb saying that it is missing.
func fixtureDir(tb testing.TB) string {
	tb.Helper()
	wd, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for dir := wd; filepath.Dir(dir) != dir; dir = filepath.Dir(dir) {
		p := filepath.Join(dir, "shared", "fixtures", "providers")
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			return p
		}
	}
	tb.Skipf("recorded provider fixtures (shared/fixtures/providers) not found above %s: skipping the decoder benchmarks", wd)
	return ""
}

// corpus is a set of streams of one wire format.
type corpus struct {
	name      string
	anthropic bool
	streams   [][]byte
}

func (c corpus) size() int64 {
	var n int64
	for _, s := range c.streams {
		n += int64(len(s))
	}
	return n
}

func read(tb testing.TB, dir string, names ...string) [][]byte {
	tb.Helper()
	var out [][]byte
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// synthetic builds a stream of about size bytes from a recorded one: its
// head (the events before the first content delta), its content deltas
// repeated, and its tail (the events after the last).
func synthetic(stream []byte, isDelta func(event []byte) bool, size int) []byte {
	events := bytes.SplitAfter(stream, []byte("\n\n"))
	first, last := -1, -1
	for i, e := range events {
		if isDelta(e) {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	var b bytes.Buffer
	for _, e := range events[:first] {
		b.Write(e)
	}
	for b.Len() < size {
		for _, e := range events[first : last+1] {
			b.Write(e)
		}
	}
	for _, e := range events[last+1:] {
		b.Write(e)
	}
	return b.Bytes()
}

func corpora(tb testing.TB) []corpus {
	dir := fixtureDir(tb)
	chat := read(tb, dir,
		"openai-chat-text.sse", "openai-chat-tool-call.sse", "openai-chat-parallel-tool-calls.sse",
		"openai-chat-tool-loop-1-tool-call.sse", "openai-chat-tool-loop-2-answer.sse",
		"openrouter-text.sse", "openrouter-tool-call.sse")
	// The Anthropic streams both decoders finish: not the mid-stream
	// error, nor the documentation example that lacks its last blank line.
	messages := read(tb, dir,
		"anthropic-docs-text.sse", "anthropic-text-then-tool-use.sse",
		"anthropic-tool-loop-1-tool-use.sse", "anthropic-tool-loop-2-answer.sse")
	const big = 1 << 20
	return []corpus{
		{name: "openai/recorded", streams: chat},
		{name: "openai/synthetic-1MiB", streams: [][]byte{synthetic(chat[0], func(e []byte) bool {
			return bytes.Contains(e, []byte(`"delta":{"content":`))
		}, big)}},
		{name: "anthropic/recorded", anthropic: true, streams: messages},
		{name: "anthropic/synthetic-1MiB", anthropic: true, streams: [][]byte{synthetic(messages[1], func(e []byte) bool {
			return bytes.Contains(e, []byte(`"type":"text_delta"`)) || bytes.Contains(e, []byte("event: ping"))
		}, big)}},
	}
}

// arms returns the two decoders of a corpus: each decodes one stream to
// a whole turn, passing text deltas on, and returns the text.
func arms(tb testing.TB, c corpus) (ours, sdk func([]byte) string) {
	sink := func(string) {}
	if c.anthropic {
		cl, err := anthropic.New(anthropic.Config{APIKey: "k", Model: "claude-opus-4-7"})
		if err != nil {
			tb.Fatal(err)
		}
		ours = func(b []byte) string {
			resp, err := cl.ReadStream(bytes.NewReader(b), sink)
			if err != nil {
				tb.Fatal(err)
			}
			return resp.Text
		}
		sdk = func(b []byte) string {
			s := anthropicsse.NewStream[anthropicsdk.MessageStreamEventUnion](anthropicsse.NewDecoder(response(b)), nil)
			var msg anthropicsdk.Message
			var text strings.Builder
			for s.Next() {
				ev := s.Current()
				if err := msg.Accumulate(ev); err != nil {
					tb.Fatal(err)
				}
				if ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta" {
					sink(ev.Delta.Text)
					text.WriteString(ev.Delta.Text)
				}
			}
			if err := s.Err(); err != nil {
				tb.Fatal(err)
			}
			return text.String()
		}
		return ours, sdk
	}
	cl, err := openai.New(openai.Config{APIKey: "k", Model: "gpt-4o"})
	if err != nil {
		tb.Fatal(err)
	}
	ours = func(b []byte) string {
		resp, err := cl.ReadStream(bytes.NewReader(b), sink)
		if err != nil {
			tb.Fatal(err)
		}
		return resp.Text
	}
	sdk = func(b []byte) string {
		s := openaisse.NewStream[openaisdk.ChatCompletionChunk](openaisse.NewDecoder(response(b)), nil)
		var acc openaisdk.ChatCompletionAccumulator
		var text strings.Builder
		for s.Next() {
			chunk := s.Current()
			acc.AddChunk(chunk)
			if len(chunk.Choices) > 0 && chunk.Choices[0].Delta.Content != "" {
				sink(chunk.Choices[0].Delta.Content)
				text.WriteString(chunk.Choices[0].Delta.Content)
			}
		}
		if err := s.Err(); err != nil {
			tb.Fatal(err)
		}
		return text.String()
	}
	return ours, sdk
}

// response wraps a recorded stream as the SDK decoders take it.
func response(b []byte) *http.Response {
	return &http.Response{
		StatusCode: http.StatusOK,
		Header:     http.Header{"Content-Type": {"text/event-stream; charset=utf-8"}},
		Body:       io.NopCloser(bytes.NewReader(b)),
	}
}

// TestArmsAgree checks that both decoders read the same text from every
// stream, so that the benchmarks compare equal work.
func TestArmsAgree(t *testing.T) {
	for _, c := range corpora(t) {
		ours, sdk := arms(t, c)
		for i, s := range c.streams {
			if a, b := ours(s), sdk(s); a != b {
				t.Errorf("%s stream %d: ours %q, sdk %q", c.name, i, a, b)
			}
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, c := range corpora(b) {
		ours, sdk := arms(b, c)
		for _, arm := range []struct {
			name string
			fn   func([]byte) string
		}{{"ours", ours}, {"sdk", sdk}} {
			b.Run(c.name+"/"+arm.name, func(b *testing.B) {
				b.SetBytes(c.size())
				b.ReportAllocs()
				for b.Loop() {
					for _, s := range c.streams {
						arm.fn(s)
					}
				}
			})
		}
	}
}

// BenchmarkRatio runs both arms in every iteration, alternating which
// goes first, and reports ours/sdk ratios of time and of allocations.
func BenchmarkRatio(b *testing.B) {
	for _, c := range corpora(b) {
		ours, sdk := arms(b, c)
		all := func(fn func([]byte) string) func() {
			return func() {
				for _, s := range c.streams {
					fn(s)
				}
			}
		}
		runOurs, runSDK := all(ours), all(sdk)
		b.Run(c.name, func(b *testing.B) {
			oursAllocs := testing.AllocsPerRun(20, runOurs)
			sdkAllocs := testing.AllocsPerRun(20, runSDK)
			var tOurs, tSDK time.Duration
			i := 0
			for b.Loop() {
				first, second, d1, d2 := runOurs, runSDK, &tOurs, &tSDK
				if i%2 == 1 {
					first, second, d1, d2 = runSDK, runOurs, &tSDK, &tOurs
				}
				t0 := time.Now()
				first()
				t1 := time.Now()
				second()
				*d1 += t1.Sub(t0)
				*d2 += time.Since(t1)
				i++
			}
			b.SetBytes(2 * c.size())
			b.ReportMetric(float64(tOurs)/float64(tSDK), "time-ours/sdk")
			b.ReportMetric(oursAllocs/sdkAllocs, "allocs-ours/sdk")
			b.ReportMetric(oursAllocs, "allocs-ours/op")
			b.ReportMetric(sdkAllocs, "allocs-sdk/op")
		})
	}
}
