package provider

// Secret is a credential such as an API key. It prints as "[redacted]"
// under every fmt verb and encodes to JSON that way, so that logging or
// serialising a config that holds one does not leak it. Reveal returns the
// value for the one place that sends it.
type Secret string

const redacted = "[redacted]"

// String implements fmt.Stringer.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString implements fmt.GoStringer, for %#v.
func (s Secret) GoString() string { return `"` + s.String() + `"` }

// MarshalJSON implements json.Marshaler: a secret never leaves in JSON.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + s.String() + `"`), nil }

// Reveal returns the secret's value.
func (s Secret) Reveal() string { return string(s) }
