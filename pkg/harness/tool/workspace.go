package tool

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Workspace returns the built-in workspace tools, in this order:
// read_file, write_file, edit_file, list_dir, grep, find and exec.
func Workspace() []Tool {
	return []Tool{readFile{}, writeFile{}, editFile{}, listDir{}, grep{}, find{}, execTool{}}
}

// SingleFile returns the tools of a single-file task: read_file,
// write_file and edit_file. Their path argument may be omitted, and then
// means the task's one file, the only entry of [Env.Only].
func SingleFile() []Tool {
	return []Tool{readFile{single: true}, writeFile{single: true}, editFile{single: true}}
}

// singlePathNote ends the description of the path argument of a
// single-file tool.
const singlePathNote = " May be omitted: it defaults to the task's file."

// pathSchema fills the schema template tmpl, whose two verbs take the end
// of the path argument's description and the list of required fields.
// The path is required unless single is set.
func pathSchema(tmpl string, single bool, required []string) json.RawMessage {
	note := ""
	if single {
		note = strconv.Quote(singlePathNote)
		note = note[1 : len(note)-1]
	} else {
		required = append([]string{"path"}, required...)
	}
	quoted := make([]string, len(required))
	for i, r := range required {
		quoted[i] = strconv.Quote(r)
	}
	return json.RawMessage(fmt.Sprintf(tmpl, note, strings.Join(quoted, ", ")))
}
