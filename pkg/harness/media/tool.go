package media

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/tool"
)

// ViewImage returns the view_image tool with the default limits.
func ViewImage() tool.Tool { return viewImage{limits: DefaultLimits()} }

// ViewImageWith returns the view_image tool with limits l.
func ViewImageWith(l Limits) tool.Tool { return viewImage{limits: l} }

type viewImage struct{ limits Limits }

const viewImageDesc = "Look at an image file of the workspace (PNG, JPEG, GIF or WebP; BMP and TIFF are converted to PNG): " +
	"it is shown to you with this call's result. At most 5 MiB, 8000 pixels a side and 50 megapixels."

const viewImageSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "The image's path relative to the workspace root."}
  },
  "required": ["path"],
  "additionalProperties": false
}`

// Spec describes view_image.
func (viewImage) Spec() provider.ToolSpec {
	return provider.ToolSpec{Name: "view_image", Description: viewImageDesc, Parameters: json.RawMessage(viewImageSchema)}
}

// ReadOnly reports true: view_image only reads.
func (viewImage) ReadOnly() bool { return true }

// Idempotent reports true.
func (viewImage) Idempotent() bool { return true }

// Call reads the image, under the read policy, and returns it.
func (t viewImage) Call(ctx context.Context, env *tool.Env, args json.RawMessage) tool.Result {
	if env == nil || env.Root == nil {
		return tool.Errorf("the tool has no workspace to act on")
	}
	if err := ctx.Err(); err != nil {
		return tool.Errorf("cancelled before the call started: %v", err)
	}
	var a struct {
		Path string `json:"path"`
	}
	if err := tool.DecodeArgs(args, &a, "path"); err != nil {
		return tool.BadArgs(err)
	}
	p, reason := tool.CleanPath(a.Path)
	if reason != "" {
		return tool.Refuse(a.Path, reason)
	}
	act, stop := tool.Authorize(ctx, env, tool.Action{Act: policy.Read, Target: p})
	if stop != nil {
		return *stop
	}
	if act.Target != p {
		return tool.Errorf("the approved read names %s, not %s; view_image reads only the file it was asked for", act.Target, p)
	}
	fi, err := env.Root.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return tool.Errorf("%s: no such file", p)
	case err != nil:
		return tool.Errorf("%s: %v", p, err)
	case !fi.Mode().IsRegular():
		return tool.Errorf("%s is not a regular file", p)
	case fi.Size() > t.limits.MaxInput:
		// Refused by its size alone: not a byte is read.
		return tool.Errorf("%s cannot be shown: it is %d bytes, over the %d-byte limit of a file to read", p, fi.Size(), t.limits.MaxInput)
	}
	f, err := env.Root.Open(p)
	if err != nil {
		return tool.Errorf("%s: %v", p, err)
	}
	data, err := io.ReadAll(io.LimitReader(f, t.limits.MaxInput+1))
	f.Close()
	if err != nil {
		return tool.Errorf("%s: %v", p, err)
	}
	if int64(len(data)) > t.limits.MaxInput {
		return tool.Errorf("%s has grown over the %d-byte limit of a file to read", p, t.limits.MaxInput)
	}
	img, info, err := Prepare(data, t.limits)
	if err != nil {
		return tool.Errorf("%s cannot be shown: %v", p, err)
	}
	return tool.Result{Output: Describe(p, img, info), Images: []provider.Image{img}}
}

// Describe is the observation that goes with an image: what it is, and
// its hash and size, which is what the trace keeps of it.
func Describe(name string, img provider.Image, info Info) string {
	conv := ""
	if info.Converted {
		conv = fmt.Sprintf(", converted from %s", upper(info.Format))
	}
	return fmt.Sprintf("[image %s: %s, %d×%d pixels, %d bytes%s, sha256 %s]", name, img.MediaType, info.Width, info.Height,
		len(img.Data), conv, Hash(img.Data))
}

// Hash is the hex SHA-256 of an image's bytes.
func Hash(data []byte) string {
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:])
}
