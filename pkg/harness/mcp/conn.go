package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// This file is the only one that speaks the SDK (github.com/mark3labs/mcp-go
// client side): everything else sees conn, remoteTool and callResult.
// Swapping SDKs is a rewrite of this file.

// conn is one session with one server.
type conn interface {
	// listTools lists every tool, following pages.
	listTools(ctx context.Context) ([]remoteTool, error)
	// callTool calls a tool. A tool that failed is a result with
	// IsError; an error is a failure to get any result.
	callTool(ctx context.Context, name string, args json.RawMessage) (*callResult, error)
	// protocol is the negotiated protocol version.
	protocol() string
	// close ends the session; it does not stop a stdio server's process.
	close() error
}

// remoteTool is a tool as the server lists it.
type remoteTool struct {
	Name        string
	Title       string
	Description string
	InputSchema json.RawMessage
	ReadOnly    bool
	Idempotent  bool
}

// callResult is a tool's answer.
type callResult struct {
	Content    []content
	Structured json.RawMessage
	IsError    bool
}

// content is one content block of an answer.
type content struct {
	Type     string // text, image, audio, resource_link, resource, or what the server said
	Text     string // text, or an embedded text resource's text
	MIMEType string
	URI      string
	Name     string
	Title    string
	Desc     string
	Size     int    // bytes of base64 data (image, audio, blob)
	Data     string // an image's base64 data, to be shown to the model
}

// hooks are what a conn reports to its session.
type hooks struct {
	// toolsChanged is called on notifications/tools/list_changed.
	toolsChanged func()
	// elicit answers an elicitation request; nil declines every one.
	elicit func(ctx context.Context, e Elicitation) (ElicitationResult, error)
}

// quiet is the SDK's logger: nothing it logs reaches stdout or stderr.
var quiet = slog.New(slog.DiscardHandler)

// dialIO starts a session over a server's standard streams, already
// framed: r is the framed stdout, w the tapped stdin.
func dialIO(ctx, life context.Context, srv *Server, r io.Reader, w io.WriteCloser, h hooks) (conn, error) {
	t := transport.NewIO(r, w, io.NopCloser(eofReader{}))
	transport.WithCommandLogger(quiet)(t)
	return handshake(ctx, life, srv, t, h)
}

// dialHTTP starts a session with a streamable HTTP server through hc,
// whose transport enforces the address floor and the output cap.
func dialHTTP(ctx, life context.Context, srv *Server, hc *http.Client, headers map[string]string, h hooks) (conn, error) {
	t, err := transport.NewStreamableHTTP(srv.URL,
		transport.WithHTTPBasicClient(hc),
		transport.WithHTTPHeaders(headers),
		transport.WithHTTPLogger(quiet),
		// The standalone GET stream carries list_changed and the
		// server's requests (elicitation); it is bounded by the HTTP
		// client, which stops it after repeated failures (bug M2).
		transport.WithContinuousListening())
	if err != nil {
		return nil, err
	}
	return handshake(ctx, life, srv, t, h)
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

type sdkConn struct {
	c *client.Client
}

// elicitor adapts hooks.elicit to the SDK.
type elicitor struct {
	server string
	fn     func(ctx context.Context, e Elicitation) (ElicitationResult, error)
}

func (e elicitor) Elicit(ctx context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	schema, _ := json.Marshal(req.Params.RequestedSchema)
	if string(schema) == "null" {
		schema = nil
	}
	r, err := e.fn(ctx, Elicitation{Server: e.server, Message: req.Params.Message, Mode: req.Params.Mode,
		URL: req.Params.URL, Schema: schema})
	if err != nil {
		return nil, err
	}
	out := &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseAction(r.Action)}}
	if r.Action == ElicitAccept && len(r.Content) > 0 {
		out.Content = r.Content
	}
	return out, nil
}

// handshake starts t and initializes the session: life owns the
// transport (the SDK keeps Start's context: bug M5), ctx bounds the
// handshake. The protocol is pinned unless the server's configuration
// says "auto" (bug M1: the SDK trusts any answer to its discover probe).
func handshake(ctx, life context.Context, srv *Server, t transport.Interface, h hooks) (conn, error) {
	var opts []client.ClientOption
	if p := srv.protocol(); p != "auto" {
		opts = append(opts, client.WithProtocolVersion(p))
	}
	if h.elicit != nil {
		opts = append(opts, client.WithElicitationHandler(elicitor{server: srv.Name, fn: h.elicit}))
	}
	c := client.NewClient(t, opts...)
	if err := c.Start(life); err != nil {
		t.Close()
		return nil, err
	}
	if h.toolsChanged != nil {
		c.OnNotification(func(n mcp.JSONRPCNotification) {
			if n.Method == string(mcp.MethodNotificationToolsListChanged) {
				h.toolsChanged()
			}
		})
	}
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "io-harness", Version: "1"}
	if p := srv.protocol(); p != "auto" {
		req.Params.ProtocolVersion = p
	}
	if _, err := c.Initialize(ctx, req); err != nil {
		c.Close()
		return nil, err
	}
	return &sdkConn{c: c}, nil
}

func (s *sdkConn) protocol() string { return s.c.ProtocolVersion() }

func (s *sdkConn) close() error { return s.c.Close() }

func (s *sdkConn) listTools(ctx context.Context) ([]remoteTool, error) {
	res, err := s.c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return nil, err
	}
	out := make([]remoteTool, 0, len(res.Tools))
	for _, t := range res.Tools {
		schema := t.RawInputSchema
		if len(schema) == 0 {
			in := t.InputSchema
			if in.Type == "" {
				in.Type = "object"
			}
			if in.Properties == nil {
				in.Properties = map[string]any{}
			}
			if schema, err = json.Marshal(in); err != nil {
				return nil, fmt.Errorf("tool %q: its input schema: %v", t.Name, err)
			}
		}
		a := t.Annotations
		out = append(out, remoteTool{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: schema,
			ReadOnly:   a.ReadOnlyHint != nil && *a.ReadOnlyHint,
			Idempotent: a.IdempotentHint != nil && *a.IdempotentHint})
	}
	return out, nil
}

func (s *sdkConn) callTool(ctx context.Context, name string, args json.RawMessage) (*callResult, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	if len(args) > 0 && string(args) != "null" {
		req.Params.Arguments = args
	}
	res, err := s.c.CallTool(ctx, req)
	if err != nil {
		return nil, unwrapTransport(err)
	}
	out := &callResult{IsError: res.IsError, Structured: res.RawStructuredContent}
	if len(out.Structured) == 0 && res.StructuredContent != nil {
		out.Structured, _ = json.Marshal(res.StructuredContent)
	}
	for _, c := range res.Content {
		out.Content = append(out.Content, fromSDK(c))
	}
	return out, nil
}

// unwrapTransport removes the SDK's "transport error:" wrapper, keeping
// what it wraps.
func unwrapTransport(err error) error {
	var te *transport.Error
	if errors.As(err, &te) && te.Err != nil {
		return te.Err
	}
	return err
}

// isClosed reports whether err says the session's transport is gone.
func isClosed(err error) bool {
	return errors.Is(err, transport.ErrTransportClosed) || errors.Is(err, transport.ErrSessionTerminated) ||
		errors.Is(err, io.ErrClosedPipe) || errors.Is(err, io.EOF)
}

func fromSDK(c mcp.Content) content {
	switch v := c.(type) {
	case mcp.TextContent:
		return content{Type: "text", Text: v.Text}
	case *mcp.TextContent:
		return content{Type: "text", Text: v.Text}
	case mcp.ImageContent:
		return content{Type: "image", MIMEType: v.MIMEType, Size: len(v.Data), Data: v.Data}
	case *mcp.ImageContent:
		return content{Type: "image", MIMEType: v.MIMEType, Size: len(v.Data), Data: v.Data}
	case mcp.AudioContent:
		return content{Type: "audio", MIMEType: v.MIMEType, Size: len(v.Data)}
	case *mcp.AudioContent:
		return content{Type: "audio", MIMEType: v.MIMEType, Size: len(v.Data)}
	case mcp.ResourceLink:
		return content{Type: "resource_link", URI: v.URI, Name: v.Name, Title: v.Title, Desc: v.Description, MIMEType: v.MIMEType}
	case *mcp.ResourceLink:
		return content{Type: "resource_link", URI: v.URI, Name: v.Name, Title: v.Title, Desc: v.Description, MIMEType: v.MIMEType}
	case mcp.EmbeddedResource:
		return embedded(v)
	case *mcp.EmbeddedResource:
		return embedded(*v)
	}
	b, _ := json.Marshal(c)
	var t struct {
		Type string `json:"type"`
	}
	json.Unmarshal(b, &t)
	return content{Type: t.Type}
}

func embedded(e mcp.EmbeddedResource) content {
	switch r := e.Resource.(type) {
	case mcp.TextResourceContents:
		return content{Type: "resource", URI: r.URI, MIMEType: r.MIMEType, Text: r.Text}
	case *mcp.TextResourceContents:
		return content{Type: "resource", URI: r.URI, MIMEType: r.MIMEType, Text: r.Text}
	case mcp.BlobResourceContents:
		return content{Type: "resource", URI: r.URI, MIMEType: r.MIMEType, Size: len(r.Blob)}
	case *mcp.BlobResourceContents:
		return content{Type: "resource", URI: r.URI, MIMEType: r.MIMEType, Size: len(r.Blob)}
	}
	return content{Type: "resource"}
}
