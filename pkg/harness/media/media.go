// Package media checks the images a model is shown, and is the
// view_image tool.
//
// A model is shown an image only in a format every vendor that takes
// images accepts — PNG, JPEG, GIF and WebP — and within bounds every one
// of them accepts: at most 5 MiB, 8000 pixels a side and 50 megapixels.
// The format is told by the file's first bytes, never its name, and the
// dimensions are read from its header, so an image over a bound is
// refused before it is decoded. BMP and TIFF are converted to PNG (their
// header is checked first, so the decode is bounded); SVG, HEIC, AVIF,
// ICO, PSD and PDF are refused by name, as is anything unrecognised.
package media

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"

	"golang.org/x/image/bmp"
	"golang.org/x/image/tiff"
	"golang.org/x/image/webp"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
)

// Limits are the bounds an image must keep to.
type Limits struct {
	// MaxBytes bounds the image as the model is sent it.
	MaxBytes int64
	// MaxInput bounds a file read to be converted (a BMP or TIFF).
	MaxInput int64
	// MaxPixels bounds width × height, and MaxSide each of them.
	MaxPixels int64
	MaxSide   int
}

// DefaultLimits are the bounds the vendors share: Anthropic's 5 MB and
// 8000 pixels a side, and a pixel count no vendor resizes from at a cost
// worth paying.
func DefaultLimits() Limits {
	return Limits{MaxBytes: 5 << 20, MaxInput: 32 << 20, MaxPixels: 50_000_000, MaxSide: 8000}
}

// Info is what an image's header says.
type Info struct {
	// Format is "png", "jpeg", "gif", "webp", or for a converted image
	// the format it was ("bmp", "tiff").
	Format string `json:"format"`
	// MediaType is what the model is sent: image/png, image/jpeg,
	// image/gif or image/webp.
	MediaType string `json:"media_type"`
	Width     int    `json:"width"`
	Height    int    `json:"height"`
	// Converted reports an image converted to PNG.
	Converted bool `json:"converted,omitempty"`
}

// Errors, usable with errors.Is.
var (
	// ErrTooLarge is an image over a bound of its [Limits].
	ErrTooLarge = errors.New("media: the image is over a bound")
	// ErrUnsupported is a file in a format the model cannot be shown.
	ErrUnsupported = errors.New("media: the format cannot be shown")
	// ErrCorrupt is a file whose header does not read as its format's.
	ErrCorrupt = errors.New("media: the image's header cannot be read")
)

// Error is why an image was refused. It wraps ErrTooLarge,
// ErrUnsupported or ErrCorrupt.
type Error struct {
	Format string // the format the bytes were recognised as, if any
	Reason string
	Err    error
}

// Error implements error.
func (e *Error) Error() string { return e.Reason }

// Unwrap returns the sentinel.
func (e *Error) Unwrap() error { return e.Err }

// Sniff names the format of data by its first bytes: one of the four
// passed through, one converted ("bmp", "tiff"), one refused by name
// ("svg", "heic", "avif", "ico", "psd", "pdf"), or "" when unknown.
func Sniff(data []byte) string {
	has := func(off int, magic string) bool {
		return len(data) >= off+len(magic) && string(data[off:off+len(magic)]) == magic
	}
	switch {
	case has(0, "\x89PNG\r\n\x1a\n"):
		return "png"
	case has(0, "\xff\xd8\xff"):
		return "jpeg"
	case has(0, "GIF87a"), has(0, "GIF89a"):
		return "gif"
	case has(0, "RIFF") && has(8, "WEBP"):
		return "webp"
	case has(0, "BM"):
		return "bmp"
	case has(0, "II*\x00"), has(0, "MM\x00*"):
		return "tiff"
	case has(0, "\x00\x00\x01\x00"):
		return "ico"
	case has(0, "8BPS"):
		return "psd"
	case has(0, "%PDF"):
		return "pdf"
	case has(4, "ftypheic"), has(4, "ftypheix"), has(4, "ftypmif1"), has(4, "ftyphevc"):
		return "heic"
	case has(4, "ftypavif"), has(4, "ftypavis"):
		return "avif"
	}
	head := data[:min(len(data), 512)]
	if i := bytes.Index(head, []byte("<svg")); i >= 0 && bytes.IndexFunc(head[:i], func(r rune) bool { return r != ' ' && r != '\n' && r != '\r' && r != '\t' }) < 0 ||
		bytes.HasPrefix(bytes.TrimSpace(head), []byte("<?xml")) && bytes.Contains(data[:min(len(data), 4096)], []byte("<svg")) {
		return "svg"
	}
	return ""
}

// Inspect checks data as an image the model may be shown as it is, or
// after conversion: its format by its first bytes, its dimensions from
// its header alone, and every bound of l. Nothing is decoded.
func Inspect(data []byte, l Limits) (Info, error) {
	format := Sniff(data)
	var info Info
	var cfg image.Config
	var err error
	r := bytes.NewReader(data)
	switch format {
	case "png":
		info.MediaType = "image/png"
		cfg, err = png.DecodeConfig(r)
	case "jpeg":
		info.MediaType = "image/jpeg"
		cfg, err = jpeg.DecodeConfig(r)
	case "gif":
		info.MediaType = "image/gif"
		cfg, err = gif.DecodeConfig(r)
	case "webp":
		info.MediaType = "image/webp"
		cfg, err = webp.DecodeConfig(r)
	case "bmp":
		info.MediaType, info.Converted = "image/png", true
		cfg, err = bmp.DecodeConfig(r)
	case "tiff":
		info.MediaType, info.Converted = "image/png", true
		cfg, err = tiff.DecodeConfig(r)
	case "":
		return info, &Error{Reason: "the file is not an image in a format the harness recognises (PNG, JPEG, GIF, WebP, or BMP and TIFF to convert)", Err: ErrUnsupported}
	default:
		return info, &Error{Format: format, Err: ErrUnsupported,
			Reason: fmt.Sprintf("%s images cannot be shown to the model: only PNG, JPEG, GIF and WebP (and BMP and TIFF, converted to PNG); convert it to PNG first", upper(format))}
	}
	info.Format = format
	if err != nil {
		return info, &Error{Format: format, Err: ErrCorrupt, Reason: fmt.Sprintf("the %s header cannot be read: %v", upper(format), err)}
	}
	info.Width, info.Height = cfg.Width, cfg.Height
	max := l.MaxBytes
	if info.Converted {
		max = l.MaxInput
	}
	switch px := int64(cfg.Width) * int64(cfg.Height); {
	case cfg.Width <= 0 || cfg.Height <= 0:
		return info, &Error{Format: format, Err: ErrCorrupt, Reason: fmt.Sprintf("the %s header says %d×%d pixels", upper(format), cfg.Width, cfg.Height)}
	case cfg.Width > l.MaxSide || cfg.Height > l.MaxSide:
		return info, &Error{Format: format, Err: ErrTooLarge,
			Reason: fmt.Sprintf("the image is %d×%d pixels, over the %d-pixel limit of a side", cfg.Width, cfg.Height, l.MaxSide)}
	case px > l.MaxPixels:
		return info, &Error{Format: format, Err: ErrTooLarge,
			Reason: fmt.Sprintf("the image is %d×%d, %d pixels, over the %d-pixel limit", cfg.Width, cfg.Height, px, l.MaxPixels)}
	case int64(len(data)) > max:
		return info, &Error{Format: format, Err: ErrTooLarge, Reason: fmt.Sprintf("the image is %d bytes, over the %d-byte limit", len(data), max)}
	}
	return info, nil
}

// Prepare makes data into the image the model is sent: checked by
// Inspect, and a BMP or TIFF decoded (within the bounds its header was
// checked against) and encoded as PNG, which must then fit MaxBytes.
func Prepare(data []byte, l Limits) (provider.Image, Info, error) {
	info, err := Inspect(data, l)
	if err != nil {
		return provider.Image{}, info, err
	}
	if !info.Converted {
		return provider.Image{MediaType: info.MediaType, Data: data}, info, nil
	}
	var img image.Image
	if info.Format == "bmp" {
		img, err = bmp.Decode(bytes.NewReader(data))
	} else {
		img, err = tiff.Decode(bytes.NewReader(data))
	}
	if err != nil {
		return provider.Image{}, info, &Error{Format: info.Format, Err: ErrCorrupt, Reason: fmt.Sprintf("the %s image cannot be decoded: %v", upper(info.Format), err)}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		return provider.Image{}, info, &Error{Format: info.Format, Err: ErrCorrupt, Reason: fmt.Sprintf("the %s image cannot be converted to PNG: %v", upper(info.Format), err)}
	}
	if int64(b.Len()) > l.MaxBytes {
		return provider.Image{}, info, &Error{Format: info.Format, Err: ErrTooLarge,
			Reason: fmt.Sprintf("converted to PNG the image is %d bytes, over the %d-byte limit", b.Len(), l.MaxBytes)}
	}
	return provider.Image{MediaType: "image/png", Data: b.Bytes()}, info, nil
}

func upper(format string) string {
	switch format {
	case "jpeg":
		return "JPEG"
	case "webp":
		return "WebP"
	}
	b := []byte(format)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 32
		}
	}
	return string(b)
}
