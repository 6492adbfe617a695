package telemetry

import (
	"crypto/x509"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
)

// settings is a Config resolved against the environment.
type settings struct {
	protocol    string
	url         string // http/protobuf: the whole traces URL
	target      string // grpc: host:port
	tls         bool
	roots       *x509.CertPool // nil: the system's
	headers     map[string]string
	timeout     time.Duration
	compression otlptracehttp.Compression
	content     bool
	resource    []attribute.KeyValue
	queue       int
	parent      func(string) string
	sync        bool
}

// resolve reads cfg, and the environment through cfg.LookupEnv, into
// settings.
func resolve(cfg Config) (settings, error) {
	get := func(k string) string {
		if cfg.LookupEnv == nil {
			return ""
		}
		v, _ := cfg.LookupEnv(k)
		return strings.TrimSpace(v)
	}
	first := func(keys ...string) string {
		for _, k := range keys {
			if v := get(k); v != "" {
				return v
			}
		}
		return ""
	}
	if strings.EqualFold(get("OTEL_SDK_DISABLED"), "true") {
		return settings{}, fmt.Errorf("%w (OTEL_SDK_DISABLED is true)", ErrDisabled)
	}
	if e := get("OTEL_TRACES_EXPORTER"); e != "" && !strings.Contains(e, "otlp") {
		return settings{}, fmt.Errorf("%w (OTEL_TRACES_EXPORTER is %q)", ErrDisabled, e)
	}
	s := settings{content: cfg.Content, parent: cfg.Parent, queue: cfg.QueueSize, headers: map[string]string{}, sync: cfg.sync}
	if s.queue <= 0 {
		s.queue = 4096
	}
	s.protocol = cfg.Protocol
	if s.protocol == "" {
		s.protocol = first("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch s.protocol {
	case "", "http/protobuf":
		s.protocol = "http/protobuf"
	case "grpc":
	default:
		return settings{}, fmt.Errorf("telemetry: protocol %q: want http/protobuf or grpc", s.protocol)
	}

	endpoint, base := cfg.Endpoint, false
	if endpoint == "" {
		if endpoint = get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); endpoint == "" {
			endpoint, base = get("OTEL_EXPORTER_OTLP_ENDPOINT"), true
		}
	}
	if endpoint == "" {
		return settings{}, ErrDisabled
	}
	if err := s.setEndpoint(endpoint, base, get); err != nil {
		return settings{}, err
	}

	for _, k := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		for _, kv := range strings.Split(get(k), ",") {
			name, value, ok := strings.Cut(kv, "=")
			name = strings.TrimSpace(name)
			if !ok || name == "" {
				continue
			}
			if v, err := url.PathUnescape(strings.TrimSpace(value)); err == nil {
				s.headers[name] = v
			}
		}
	}
	for k, v := range cfg.Headers {
		s.headers[k] = v
	}

	s.timeout = cfg.Timeout
	if s.timeout <= 0 {
		if ms, err := strconv.Atoi(first("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT")); err == nil && ms > 0 {
			s.timeout = time.Duration(ms) * time.Millisecond
		} else {
			s.timeout = 10 * time.Second
		}
	}
	s.compression = otlptracehttp.NoCompression
	if first("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "OTEL_EXPORTER_OTLP_COMPRESSION") == "gzip" {
		s.compression = otlptracehttp.GzipCompression
	}
	if ca := first("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", "OTEL_EXPORTER_OTLP_CERTIFICATE"); ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return settings{}, fmt.Errorf("telemetry: the collector's certificate: %w", err)
		}
		s.roots = x509.NewCertPool()
		if !s.roots.AppendCertsFromPEM(pem) {
			return settings{}, fmt.Errorf("telemetry: %s holds no PEM certificate", ca)
		}
	}

	service := cfg.ServiceName
	if service == "" {
		service = get("OTEL_SERVICE_NAME")
	}
	if service == "" {
		service = "io-harness"
	}
	for _, kv := range strings.Split(get("OTEL_RESOURCE_ATTRIBUTES"), ",") {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" || k == "service.name" {
			continue
		}
		if uv, err := url.PathUnescape(strings.TrimSpace(v)); err == nil {
			s.resource = append(s.resource, attribute.String(k, uv))
		}
	}
	s.resource = append(s.resource, attribute.String("service.name", service),
		attribute.String("telemetry.sdk.language", "go"), attribute.String("telemetry.sdk.name", "opentelemetry"))
	return s, nil
}

// setEndpoint reads the collector's address for the protocol. A base
// endpoint (OTEL_EXPORTER_OTLP_ENDPOINT) gets /v1/traces added for HTTP.
func (s *settings) setEndpoint(endpoint string, base bool, get func(string) string) error {
	insecureEnv := strings.EqualFold(get("OTEL_EXPORTER_OTLP_TRACES_INSECURE"), "true") ||
		strings.EqualFold(get("OTEL_EXPORTER_OTLP_INSECURE"), "true")
	if s.protocol == "grpc" {
		if !strings.Contains(endpoint, "://") {
			s.target, s.tls = endpoint, !insecureEnv
			return nil
		}
		u, err := url.Parse(endpoint)
		if err != nil || u.Host == "" {
			return fmt.Errorf("telemetry: endpoint %q is not host:port or a URL", endpoint)
		}
		s.target, s.tls = u.Host, u.Scheme == "https"
		return nil
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return fmt.Errorf("telemetry: endpoint %q is not an http or https URL", endpoint)
	}
	if base || u.Path == "" || u.Path == "/" {
		u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
	}
	s.url, s.tls = u.String(), u.Scheme == "https"
	return nil
}
