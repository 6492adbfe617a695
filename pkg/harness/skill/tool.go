package skill

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/tool"
)

// ReadSkill returns the read_skill tool over skills.
func ReadSkill(skills []Skill) tool.Tool {
	return readSkill{skills: skills}
}

type readSkill struct{ skills []Skill }

const readSkillDesc = "Read a skill listed in the system prompt: its instructions (SKILL.md's body) and the list of its files, " +
	"or, with file, one of those files."

const readSkillSchema = `{
  "type": "object",
  "properties": {
    "name": {"type": "string", "description": "The skill's name, as listed."},
    "file": {"type": "string", "description": "A file of the skill, relative to its directory, as read_skill lists them. Default: the instructions."}
  },
  "required": ["name"],
  "additionalProperties": false
}`

// maxListed bounds the files read_skill lists.
const maxListed = 200

// maxCompanion bounds a companion file read_skill returns.
const maxCompanion = 1 << 20

// Spec describes read_skill.
func (readSkill) Spec() provider.ToolSpec {
	return provider.ToolSpec{Name: "read_skill", Description: readSkillDesc, Parameters: json.RawMessage(readSkillSchema)}
}

// ReadOnly reports true: read_skill only reads.
func (readSkill) ReadOnly() bool { return true }

// Idempotent reports true.
func (readSkill) Idempotent() bool { return true }

// Target is what the read policy judges for file of skill name:
// "skill:<name>/<file>", so that a rule can name a skill's files
// ("skill:pdf/**") and a rule for a file's last segment (".env",
// "*.pem") holds there too.
func Target(name, file string) string { return "skill:" + name + "/" + file }

// Call returns the skill's instructions, or one of its files.
func (t readSkill) Call(ctx context.Context, env *tool.Env, args json.RawMessage) tool.Result {
	if err := ctx.Err(); err != nil {
		return tool.Errorf("cancelled before the call started: %v", err)
	}
	var a struct {
		Name string `json:"name"`
		File string `json:"file"`
	}
	if err := tool.DecodeArgs(args, &a, "name"); err != nil {
		return tool.BadArgs(err)
	}
	var s *Skill
	names := make([]string, len(t.skills))
	for i := range t.skills {
		names[i] = t.skills[i].Name
		if t.skills[i].Name == a.Name {
			s = &t.skills[i]
		}
	}
	if s == nil {
		return tool.Errorf("there is no skill %q; the skills are: %s", a.Name, strings.Join(names, ", "))
	}
	file := "SKILL.md"
	if a.File != "" {
		clean, reason := tool.CleanPath(a.File)
		if reason != "" {
			return tool.Refuse(a.File, reason)
		}
		file = clean
	}
	target := Target(s.Name, file)
	act, stop := tool.Authorize(ctx, env, tool.Action{Act: policy.Read, Target: target})
	if stop != nil {
		return *stop
	}
	if act.Target != target {
		return tool.Errorf("the approved read names %s, not %s; read_skill reads only what it was asked for", act.Target, target)
	}
	if file == "SKILL.md" {
		var b strings.Builder
		fmt.Fprintf(&b, "# skill %s\n\n%s", s.Name, s.Body)
		list, more := files(s.Dir, maxListed)
		if len(list) > 0 {
			fmt.Fprintf(&b, "\n\nFiles of this skill (read one with read_skill and file):\n- %s", strings.Join(list, "\n- "))
			if more {
				fmt.Fprintf(&b, "\n(more than %d; only the first are listed)", maxListed)
			}
		}
		return tool.Result{Output: tool.Bound(b.String())}
	}
	// The skill's directory is the root: nothing outside it opens, a
	// symlink that leads out included.
	root, err := os.OpenRoot(s.Dir)
	if err != nil {
		return tool.Errorf("skill %s cannot be opened: %v", s.Name, err)
	}
	defer root.Close()
	data, err := readFile(root, file, maxCompanion)
	if err != nil {
		if strings.Contains(err.Error(), "escapes from parent") {
			return tool.Refuse(a.File, "the path leads out of the skill's directory")
		}
		return tool.Errorf("skill %s: %v", s.Name, err)
	}
	if bytesBinary(data) {
		return tool.Result{Output: fmt.Sprintf("%s of skill %s is a binary file of %d bytes", file, s.Name, len(data))}
	}
	return tool.Result{Output: tool.Bound(fmt.Sprintf("%s of skill %s:\n%s", file, s.Name, data))}
}

func bytesBinary(data []byte) bool {
	head := data[:min(len(data), 8000)]
	return strings.IndexByte(string(head), 0) >= 0
}
