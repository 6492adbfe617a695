package harness

import (
	"fmt"
	"slices"
	"sync"

	"github.com/initorigin/io-harness-go/pkg/harness/git"
	"github.com/initorigin/io-harness-go/pkg/harness/mcp"
	"github.com/initorigin/io-harness-go/pkg/harness/media"
	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/skill"
	"github.com/initorigin/io-harness-go/pkg/harness/tool"
)

// reach is what a run's git, skill and image tools need from the run:
// the skills' catalogue, the bundles dropped and their deny layers, and
// the images calls returned, shown in the next turn only.
type reach struct {
	catalog string          // the skills, as the system prompt lists them
	dropped []skill.Dropped // bundles that did not load
	deny    []policy.Layer  // the bundles' deny rules

	mu   sync.Mutex                  // guards step: read-only calls run concurrently
	step map[string][]provider.Image // the images of this step's calls, by call id
	next map[string][]provider.Image // the images of the last committed step, shown in the next turn
}

// reachTools returns the tools Options ask for beside the workspace's:
// the git tools, view_image and read_skill, and loads the skills and
// bundles (whose MCP servers join the run's and whose rules join its
// policy).
func (r *runner) reachTools() ([]tool.Tool, error) {
	var tools []tool.Tool
	if r.opts.Git != nil {
		tools = append(tools, git.Tools(*r.opts.Git)...)
	}
	if r.opts.ViewImage {
		tools = append(tools, media.ViewImage())
	}
	skills, err := skill.Load(r.opts.Skills)
	if err != nil {
		return nil, &Error{Kind: ErrConfig, Field: "options.skills", Err: err}
	}
	if len(r.opts.Bundles) > 0 {
		var taken []string
		for _, s := range skills {
			taken = append(taken, s.Name)
		}
		for _, s := range r.opts.MCPServers {
			taken = append(taken, s.Name)
		}
		bundles, dropped := skill.LoadBundles(r.opts.Bundles, taken)
		r.reach.dropped = dropped
		servers := append([]mcp.Server(nil), r.opts.MCPServers...)
		for _, b := range bundles {
			skills = append(skills, b.Skills...)
			servers = append(servers, b.MCP...)
			if len(b.Deny.Rules) > 0 {
				r.reach.deny = append(r.reach.deny, b.Deny)
			}
		}
		r.opts.MCPServers = servers
	}
	if len(skills) > skill.MaxSkills {
		return nil, configError("options.bundles", "the skills and the bundles' skills are %d, over the %d a run lists", len(skills), skill.MaxSkills)
	}
	if len(skills) > 0 {
		tools = append(tools, skill.ReadSkill(skills))
		r.reach.catalog = "\n" + skill.Catalog(skills)
	}
	return append(tools, r.opts.moreReach...), nil
}

// reportBundles traces the bundles that were dropped.
func (r *runner) reportBundles() {
	for _, d := range r.reach.dropped {
		r.emit(Event{Kind: EventBundle, Target: d.Dir, Reason: "the bundle was dropped: " + d.Reason, IsError: true})
	}
}

// withBundles stacks the bundles' deny layers on a policy: on the
// caller's, or, for a run without one, on a permissive one, so that a
// bundle's denials hold in every run.
func (r *runner) withBundles(base *policy.Policy) *policy.Policy {
	if len(r.reach.deny) == 0 {
		return base
	}
	p := policy.Permissive()
	if base != nil {
		p = *base
	}
	p = policy.Merge(p, policy.Policy{Defaults: p.Defaults, Layers: r.reach.deny})
	return &p
}

// keepImages records the images a call returned, to show them in the
// next turn, and traces each. It returns the observation's text: the
// tool's, with a note when the model cannot be shown images, which
// makes a view_image call an error.
func (r *runner) keepImages(n int, call provider.ToolCall, res *tool.Result, emit func(Event)) {
	if len(res.Images) == 0 {
		return
	}
	p := r.providers[r.active]
	if !provider.TakesImages(p) {
		res.Output += fmt.Sprintf("\n[the image%s cannot be shown: the model %s does not take images (the model catalogue says so, or does not know it; a catalogue override can say \"images\": true)]",
			plural(len(res.Images)), p.Name())
		if call.Name == "view_image" {
			res.IsError = true
		}
		res.Images = nil
		return
	}
	for _, img := range res.Images {
		rec := &Image{MediaType: img.MediaType, SHA256: media.Hash(img.Data), Size: len(img.Data)}
		if r.opts.TraceImages {
			rec.Data = img.Data
		}
		emit(Event{Kind: EventImage, Step: n, Tool: call.Name, CallID: call.ID, Image: rec})
	}
	r.reach.mu.Lock()
	defer r.reach.mu.Unlock()
	if r.reach.step == nil {
		r.reach.step = map[string][]provider.Image{}
	}
	r.reach.step[call.ID] = res.Images
}

// committed moves the images of the step just committed to the next
// turn, and forgets those of the step before: an image is shown once, in
// the turn after the call that returned it.
func (r *runner) committed() {
	r.reach.mu.Lock()
	defer r.reach.mu.Unlock()
	r.reach.next, r.reach.step = r.reach.step, nil
}

// attachImages puts the images of the last committed step on the tool
// messages that answer their calls (the last message for each call id).
func (r *runner) attachImages(msgs []provider.Message) []provider.Message {
	if len(r.reach.next) == 0 {
		return msgs
	}
	// The messages are the transcript's own: the images go on a copy.
	msgs = slices.Clone(msgs)
	for id, imgs := range r.reach.next {
		for i := len(msgs) - 1; i >= 0; i-- {
			if msgs[i].Role == provider.RoleTool && msgs[i].ToolCallID == id {
				msgs[i].Images = imgs
				break
			}
		}
	}
	return msgs
}

// imagesFor returns req as provider p may be sent it: unchanged when p
// takes images, else without them, each tool message that had some
// saying so. A fallback that does not take images still gets a request
// it accepts.
func imagesFor(p provider.Provider, req *provider.Request) *provider.Request {
	if provider.TakesImages(p) {
		return req
	}
	var out *provider.Request
	for i, m := range req.Messages {
		if len(m.Images) == 0 {
			continue
		}
		if out == nil {
			c := *req
			c.Messages = append([]provider.Message(nil), req.Messages...)
			out = &c
		}
		out.Messages[i].Images = nil
		out.Messages[i].Content += fmt.Sprintf("\n[%d image%s not shown: the model %s does not take images]", len(m.Images), plural(len(m.Images)), p.Name())
	}
	if out == nil {
		return req
	}
	return out
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
