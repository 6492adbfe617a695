package harness

import "github.com/initorigin/io-harness-go/pkg/harness/tool"

// WrapFiles makes every agent of a tree run with o write through
// wrap(view), view being its own view of the tree's workspace: a negative
// control's way to switch the write guard off.
func WrapFiles(o *Options, wrap func(view tool.Files) tool.Files) { o.wrapFiles = wrap }

// AddReachTool makes a run with o build t among its reach tools, after
// the git, skill and media tools: a negative control's stand-in for a
// new reach tool that is not reserved.
func AddReachTool(o *Options, t tool.Tool) { o.moreReach = append(o.moreReach, t) }

// RetryUnchangedAfterOverflow makes a run with o ask again after a
// context overflow even when folding left the request as it was: the
// negative control of the check that prevents it.
func RetryUnchangedAfterOverflow(o *Options) { o.retryUnchanged = true }

// EstimateOnly makes a run with o judge every request's input by the
// estimate alone, ignoring what the provider counted for the last one:
// the negative control of the input meter.
func EstimateOnly(o *Options) { o.estimateOnly = true }
