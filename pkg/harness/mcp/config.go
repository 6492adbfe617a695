package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// Server configures one MCP server: a name, and either a stdio command or
// an HTTP URL. It is plain data; the spec's mcp_servers is a list of
// them. Unknown fields are errors.
type Server struct {
	// Name names the server in tool names (mcp__<name>__<tool>), in the
	// trace and in errors: 1 to 32 letters, digits, '-' and '_', starting
	// with a letter or digit, with no "__" and no trailing '_'.
	Name string `json:"name"`

	// Command is the argv of a stdio server. Starting it is an exec of
	// this argv, judged by the policy.
	Command []string `json:"command,omitempty"`
	// Env is the stdio server's whole environment beyond PATH: nothing is
	// inherited from the harness. A value may name variables of the
	// caller's environment as ${NAME}; they are read when the server
	// starts and never stored.
	Env map[string]string `json:"env,omitempty"`
	// Cwd is the stdio server's working directory, an absolute host path.
	// Inside the sandbox it is bound writable; empty means a fresh empty
	// directory.
	Cwd string `json:"cwd,omitempty"`
	// Host runs the stdio server on the host, outside the sandbox. The
	// trace says so on every connect.
	Host bool `json:"host,omitempty"`

	// URL is the endpoint of a streamable HTTP server (http or https).
	// Reaching it is a net check of its host and port, through the same
	// address floor as every other dial.
	URL string `json:"url,omitempty"`
	// Headers are sent with every HTTP request. A value may name
	// variables of the caller's environment as ${NAME}, such as
	// "Bearer ${GITHUB_TOKEN}"; they are read at connect and never
	// stored or traced.
	Headers map[string]string `json:"headers,omitempty"`

	// StartTimeout bounds the start and the handshake; zero means 30s.
	StartTimeout sandbox.Duration `json:"start_timeout,omitempty"`
	// CallTimeout bounds one tool call; zero means 60s.
	CallTimeout sandbox.Duration `json:"call_timeout,omitempty"`
	// MaxOutput bounds one message from the server, in bytes (a stdout
	// line, an HTTP body or SSE line); a call whose answer is larger
	// fails. Zero means 4 MiB.
	MaxOutput int64 `json:"max_output,omitempty"`
	// Protocol pins the protocol version. Empty means "2025-11-25", the
	// newest version of the initialize handshake; "auto" first probes
	// for the stateless 2026-07-28 protocol (server/discover).
	Protocol string `json:"protocol,omitempty"`
}

// Defaults of the zero fields of [Server].
const (
	DefaultStartTimeout = 30 * time.Second
	DefaultCallTimeout  = 60 * time.Second
	DefaultMaxOutput    = 4 << 20
	// DefaultProtocol is the protocol version a server is pinned to
	// unless its configuration says otherwise.
	DefaultProtocol = "2025-11-25"
	// maxMaxOutput bounds MaxOutput.
	maxMaxOutput = 64 << 20
)

func (s *Server) startTimeout() time.Duration {
	if s.StartTimeout > 0 {
		return time.Duration(s.StartTimeout)
	}
	return DefaultStartTimeout
}

func (s *Server) callTimeout() time.Duration {
	if s.CallTimeout > 0 {
		return time.Duration(s.CallTimeout)
	}
	return DefaultCallTimeout
}

func (s *Server) maxOutput() int {
	if s.MaxOutput > 0 {
		return int(s.MaxOutput)
	}
	return DefaultMaxOutput
}

func (s *Server) protocol() string {
	if s.Protocol == "" {
		return DefaultProtocol
	}
	return s.Protocol
}

// Transport is "stdio" or "http".
func (s *Server) Transport() string {
	if s.URL != "" {
		return "http"
	}
	return "stdio"
}

// ConfigError is a server configuration that is not valid. Field is the
// JSON path of the offending field, such as "mcp_servers[1].command".
type ConfigError struct {
	Field  string
	Reason string
}

// Error implements error.
func (e *ConfigError) Error() string { return "mcp: " + e.Field + ": " + e.Reason }

var (
	serverName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$`)
	envName    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	headerName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
	protocols  = []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "auto"}
)

// ParseServers reads a JSON list of servers and validates it. Unknown
// fields are errors.
func ParseServers(data []byte) ([]Server, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var s []Server
	if err := dec.Decode(&s); err != nil {
		return nil, &ConfigError{Field: "mcp_servers", Reason: err.Error()}
	}
	if dec.More() {
		return nil, &ConfigError{Field: "mcp_servers", Reason: "trailing data after the list"}
	}
	if err := Validate(s); err != nil {
		return nil, err
	}
	return s, nil
}

// Validate checks every server and that no two share a name. A problem is
// a *ConfigError whose Field is "mcp_servers[i].<field>".
func Validate(servers []Server) error {
	seen := map[string]int{}
	for i := range servers {
		field := fmt.Sprintf("mcp_servers[%d]", i)
		if err := servers[i].Validate(); err != nil {
			var ce *ConfigError
			if errors.As(err, &ce) {
				ce.Field = field + "." + ce.Field
			}
			return err
		}
		if j, ok := seen[servers[i].Name]; ok {
			return &ConfigError{Field: field + ".name", Reason: fmt.Sprintf("%q is also the name of mcp_servers[%d]", servers[i].Name, j)}
		}
		seen[servers[i].Name] = i
	}
	return nil
}

// Validate checks s; a problem is a *ConfigError naming its field.
func (s *Server) Validate() error {
	bad := func(field, format string, a ...any) error {
		return &ConfigError{Field: field, Reason: fmt.Sprintf(format, a...)}
	}
	switch {
	case !serverName.MatchString(s.Name):
		return bad("name", "%q: want 1 to 32 letters, digits, '-' and '_', starting with a letter or digit", s.Name)
	case strings.Contains(s.Name, "__") || strings.HasSuffix(s.Name, "_"):
		return bad("name", "%q: a name has no \"__\" and does not end in '_', so that mcp__<server>__<tool> splits one way", s.Name)
	case len(s.Command) > 0 && s.URL != "":
		return bad("url", "a server has either a command (stdio) or a url (http), not both")
	case len(s.Command) == 0 && s.URL == "":
		return bad("command", "a server needs a command (stdio) or a url (http)")
	case s.StartTimeout < 0:
		return bad("start_timeout", "must not be negative")
	case s.CallTimeout < 0:
		return bad("call_timeout", "must not be negative")
	case s.MaxOutput < 0 || s.MaxOutput > maxMaxOutput:
		return bad("max_output", "want 0 (4 MiB) to %d bytes, got %d", maxMaxOutput, s.MaxOutput)
	}
	if s.Protocol != "" && !contains(protocols, s.Protocol) {
		return bad("protocol", "%q: want one of %s", s.Protocol, strings.Join(protocols, ", "))
	}
	if len(s.Command) > 0 {
		if s.Command[0] == "" {
			return bad("command[0]", "the program is empty")
		}
		for i, a := range s.Command {
			if strings.IndexByte(a, 0) >= 0 {
				return bad(fmt.Sprintf("command[%d]", i), "contains a NUL byte")
			}
		}
		for k, v := range s.Env {
			if !envName.MatchString(k) {
				return bad("env", "%q is not a variable name", k)
			}
			if err := checkRefs(v); err != nil {
				return bad("env."+k, "%v", err)
			}
		}
		if s.Cwd != "" && !isAbs(s.Cwd) {
			return bad("cwd", "%q: want an absolute path", s.Cwd)
		}
		if len(s.Headers) > 0 {
			return bad("headers", "applies to an http server only")
		}
		return nil
	}
	if len(s.Env) > 0 {
		return bad("env", "applies to a stdio server only")
	}
	if s.Cwd != "" {
		return bad("cwd", "applies to a stdio server only")
	}
	if s.Host {
		return bad("host", "applies to a stdio server only: an http server is reached, not run")
	}
	if _, _, err := endpoint(s.URL); err != nil {
		return bad("url", "%v", err)
	}
	for k, v := range s.Headers {
		if !headerName.MatchString(k) {
			return bad("headers", "%q is not a header name", k)
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return bad("headers."+k, "contains a line break or NUL byte")
		}
		if err := checkRefs(v); err != nil {
			return bad("headers."+k, "%v", err)
		}
	}
	return nil
}

// endpoint returns the host and host:port of an http(s) URL.
func endpoint(raw string) (host, hostPort string, err error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", fmt.Errorf("not a URL: %v", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", "", fmt.Errorf("%q: want an http or https URL", raw)
	}
	if u.User != nil {
		return "", "", fmt.Errorf("credentials in the URL are not allowed: put them in headers")
	}
	host = u.Hostname()
	if host == "" {
		return "", "", fmt.Errorf("%q has no host", raw)
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", "", fmt.Errorf("port %q is not a number from 1 to 65535", port)
	}
	return host, net.JoinHostPort(host, port), nil
}

// refPattern matches a ${NAME} reference.
var refPattern = regexp.MustCompile(`\$\{([^}]*)\}`)

// checkRefs checks that every ${...} in v names a variable.
func checkRefs(v string) error {
	for _, m := range refPattern.FindAllStringSubmatch(v, -1) {
		if !envName.MatchString(m[1]) {
			return fmt.Errorf("${%s} is not a variable name", m[1])
		}
	}
	return nil
}

// expand replaces every ${NAME} in v with lookup's value; a variable that
// is not set is an error naming it, never an empty string.
func expand(v string, lookup func(string) (string, bool)) (string, error) {
	var missing string
	out := refPattern.ReplaceAllStringFunc(v, func(m string) string {
		name := m[2 : len(m)-1]
		if lookup != nil {
			if val, ok := lookup(name); ok {
				return val
			}
		}
		if missing == "" {
			missing = name
		}
		return ""
	})
	if missing != "" {
		return "", fmt.Errorf("the variable %s is not set", missing)
	}
	return out, nil
}

func isAbs(p string) bool {
	return strings.HasPrefix(p, "/") || len(p) >= 3 && p[1] == ':' && (p[2] == '\\' || p[2] == '/')
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
