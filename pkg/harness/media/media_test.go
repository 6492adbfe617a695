package media

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/image/bmp"
	"golang.org/x/image/tiff"

	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/tool"
)

func picture(w, h int) image.Image {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for x := 0; x < w; x++ {
		for y := 0; y < h; y++ {
			img.Set(x, y, color.RGBA{uint8(x), uint8(y), 128, 255})
		}
	}
	return img
}

func encoded(t testing.TB, enc func(*bytes.Buffer, image.Image) error) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := enc(&b, picture(40, 30)); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// pngHeader is a PNG signature and an IHDR chunk declaring w×h, and no
// image data: a full decode of it fails, reading its header does not.
func pngHeader(w, h uint32) []byte {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	ihdr[8], ihdr[9] = 8, 0 // 8-bit grayscale
	binary.Write(&b, binary.BigEndian, uint32(13))
	chunk := append([]byte("IHDR"), ihdr...)
	b.Write(chunk)
	binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(chunk))
	return b.Bytes()
}

// webpLossless is the header of a lossless WebP of w×h.
func webpLossless(w, h int) []byte {
	bits := uint32(w-1) | uint32(h-1)<<14
	payload := append([]byte{0x2f}, byte(bits), byte(bits>>8), byte(bits>>16), byte(bits>>24))
	payload = append(payload, make([]byte, 16)...)
	var b bytes.Buffer
	b.WriteString("RIFF")
	binary.Write(&b, binary.LittleEndian, uint32(4+8+len(payload)))
	b.WriteString("WEBPVP8L")
	binary.Write(&b, binary.LittleEndian, uint32(len(payload)))
	b.Write(payload)
	return b.Bytes()
}

func TestInspectAndPrepare(t *testing.T) {
	l := DefaultLimits()
	for _, tc := range []struct {
		name      string
		data      []byte
		mediaType string
		w, h      int
		converted bool
		err       error
		reason    string
	}{
		{"png", encoded(t, func(b *bytes.Buffer, i image.Image) error { return png.Encode(b, i) }), "image/png", 40, 30, false, nil, ""},
		{"jpeg", encoded(t, func(b *bytes.Buffer, i image.Image) error { return jpeg.Encode(b, i, nil) }), "image/jpeg", 40, 30, false, nil, ""},
		{"gif", encoded(t, func(b *bytes.Buffer, i image.Image) error { return gif.Encode(b, i, nil) }), "image/gif", 40, 30, false, nil, ""},
		{"webp", webpLossless(40, 30), "image/webp", 40, 30, false, nil, ""},
		{"bmp", encoded(t, func(b *bytes.Buffer, i image.Image) error { return bmp.Encode(b, i) }), "image/png", 40, 30, true, nil, ""},
		{"tiff", encoded(t, func(b *bytes.Buffer, i image.Image) error { return tiff.Encode(b, i, nil) }), "image/png", 40, 30, true, nil, ""},
		{"svg", []byte(`<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg"></svg>`), "", 0, 0, false, ErrUnsupported, "SVG images cannot be shown"},
		{"heic", append([]byte("\x00\x00\x00\x18ftypheic"), make([]byte, 20)...), "", 0, 0, false, ErrUnsupported, "HEIC images"},
		{"avif", append([]byte("\x00\x00\x00\x18ftypavif"), make([]byte, 20)...), "", 0, 0, false, ErrUnsupported, "AVIF images"},
		{"ico", []byte("\x00\x00\x01\x00\x01\x00\x10\x10"), "", 0, 0, false, ErrUnsupported, "ICO images"},
		{"pdf", []byte("%PDF-1.7\n"), "", 0, 0, false, ErrUnsupported, "PDF images"},
		{"text", []byte("hello"), "", 0, 0, false, ErrUnsupported, "not an image"},
		{"100 megapixels", pngHeader(10000, 10000), "", 0, 0, false, ErrTooLarge, "over the 8000-pixel limit of a side"},
		{"60 megapixels in bounds of a side", pngHeader(7800, 7800), "", 0, 0, false, ErrTooLarge, "over the 50000000-pixel limit"},
		{"zero size", pngHeader(0, 10), "", 0, 0, false, ErrCorrupt, ""},
		{"truncated header", []byte("\x89PNG\r\n\x1a\n\x00\x00"), "", 0, 0, false, ErrCorrupt, "header cannot be read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img, info, err := Prepare(tc.data, l)
			if tc.err != nil {
				if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.reason) {
					t.Fatalf("Prepare: %v, want %v (%q)", err, tc.err, tc.reason)
				}
				var me *Error
				if !errors.As(err, &me) {
					t.Fatalf("%T is not a *media.Error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if img.MediaType != tc.mediaType || info.Width != tc.w || info.Height != tc.h || info.Converted != tc.converted {
				t.Fatalf("got %s %d×%d converted=%v", img.MediaType, info.Width, info.Height, info.Converted)
			}
			if tc.converted {
				if got, err := png.Decode(bytes.NewReader(img.Data)); err != nil || got.Bounds().Dx() != tc.w {
					t.Fatalf("the conversion is not a PNG of the picture: %v", err)
				}
			} else if !bytes.Equal(img.Data, tc.data) {
				t.Fatalf("a passed-through image was changed")
			}
		})
	}
}

func newWorkspace(t *testing.T, files map[string][]byte) (string, *tool.Env) {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return dir, &tool.Env{Root: root}
}

func view(env *tool.Env, path string) tool.Result {
	args, _ := json.Marshal(map[string]string{"path": path})
	return ViewImage().Call(context.Background(), env, args)
}

// allocated is what fn allocated, in bytes.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A 100 MB file and a 100-megapixel image are refused without being
// read or decoded whole: view_image allocates almost nothing for them.
// The negative control is a full decode of a (small) real image, which
// allocates its pixels.
func TestHugeImagesRefusedUndecoded(t *testing.T) {
	dir, env := newWorkspace(t, map[string][]byte{"big.png": pngHeader(100, 100), "many.png": pngHeader(10000, 10000),
		"ok.png": encoded(t, func(b *bytes.Buffer, i image.Image) error { return png.Encode(b, i) })})
	if err := os.Truncate(filepath.Join(dir, "big.png"), 100<<20); err != nil { // sparse: 100 MB on paper
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{"big.png", "104857600 bytes, over the"},
		{"many.png", "10000×10000 pixels, over the 8000-pixel limit"},
	} {
		var r tool.Result
		n := allocated(func() { r = view(env, tc.path) })
		if !r.IsError || !strings.Contains(r.Output, tc.want) || len(r.Images) != 0 {
			t.Errorf("%s: %+v", tc.path, r)
		}
		if n > 1<<20 {
			t.Errorf("refusing %s allocated %d bytes: it was read or decoded", tc.path, n)
		}
	}
	// Negative control: decoding a 10000×10000 grayscale image whole
	// would need 100 MB; a real small image decoded costs its pixels.
	var full uint64 = allocated(func() {
		png.Decode(bytes.NewReader(encoded(t, func(b *bytes.Buffer, i image.Image) error { return png.Encode(b, i) })))
	})
	if full < 40*30*4 {
		t.Errorf("negative control: a full decode allocated only %d bytes", full)
	}
	r := view(env, "ok.png")
	if r.IsError || len(r.Images) != 1 || r.Images[0].MediaType != "image/png" || !strings.Contains(r.Output, "sha256 ") {
		t.Errorf("ok.png: %+v", r)
	}
}

// view_image reads under the read policy and within the workspace; a
// file's name does not decide its type.
func TestViewImageBoundary(t *testing.T) {
	pngData := encoded(t, func(b *bytes.Buffer, i image.Image) error { return png.Encode(b, i) })
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "x.png"), pngData, 0o644)
	dir, env := newWorkspace(t, map[string][]byte{"shot.jpg": pngData, "secret/plan.png": pngData})
	os.Symlink(filepath.Join(outside, "x.png"), filepath.Join(dir, "out.png"))
	if r := view(env, "shot.jpg"); r.IsError || r.Images[0].MediaType != "image/png" {
		t.Errorf("a PNG named .jpg: %+v", r)
	}
	for _, p := range []string{"out.png", "../x.png", "/etc/passwd"} {
		if r := view(env, p); !r.IsError || len(r.Images) != 0 {
			t.Errorf("%s was shown: %s", p, r.Output)
		}
	}
	p := policy.Permissive()
	p.Layers = []policy.Layer{{Name: "t", Rules: []policy.Rule{{Act: policy.Read, Effect: policy.Deny, Pattern: "secret/**"}}}}
	env.Gate = denyGate{p}
	if r := view(env, "secret/plan.png"); !r.IsError || r.Refusal == "" || len(r.Images) != 0 {
		t.Errorf("a read-denied image was shown: %+v", r)
	}
	if r := view(env, "shot.jpg"); r.IsError {
		t.Errorf("negative control: an allowed image was refused: %s", r.Output)
	}
}

type denyGate struct{ p policy.Policy }

func (g denyGate) Authorize(_ context.Context, a tool.Action) tool.Verdict {
	if v := g.p.Explain(a.Act, a.Target); v.Effect != policy.Allow {
		return tool.Verdict{Refused: v.String()}
	}
	return tool.Verdict{Action: a}
}

func (g denyGate) Peek(act policy.Act, target string) policy.Verdict { return g.p.Explain(act, target) }

func FuzzInspect(f *testing.F) {
	f.Add(pngHeader(10, 10))
	f.Add(webpLossless(3, 4))
	f.Add([]byte("GIF89a\x10\x00\x10\x00\x00\x00\x00"))
	f.Add([]byte("\xff\xd8\xff\xc0\x00\x11\x08\x00\x10\x00\x10\x03"))
	f.Add([]byte("BM"))
	f.Fuzz(func(t *testing.T, data []byte) {
		l := Limits{MaxBytes: 1 << 16, MaxInput: 1 << 16, MaxPixels: 1 << 16, MaxSide: 512}
		info, err := Inspect(data, l)
		if err != nil {
			var me *Error
			if !errors.As(err, &me) {
				t.Fatalf("%T is not a *media.Error", err)
			}
			return
		}
		if info.Width <= 0 || info.Height <= 0 || info.Width > l.MaxSide || info.Height > l.MaxSide ||
			int64(info.Width)*int64(info.Height) > l.MaxPixels {
			t.Fatalf("accepted %+v", info)
		}
	})
}
