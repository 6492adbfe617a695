package wire

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxMessage is the longest message a *provider.Error carries, in bytes;
// a longer one is cut after it is cleaned, and ends in "…".
const MaxMessage = 1 << 10

// MinSecretRun is the shortest run of a secret's characters that
// [Clean] redacts wherever it appears: a prefix, a suffix or any other
// piece of the key, not only the whole key.
const MinSecretRun = 8

// redacted replaces what [Clean] removes.
const redacted = "[redacted]"

// Clean makes provider text fit for an error message, an event or a log,
// in this order:
//
//  1. Invalid UTF-8, control characters and invisible format characters
//     become U+FFFD (tabs and line ends a space), so that nothing later
//     (a JSON encoder, a terminal) can delete a character and join two
//     pieces of a key into a longer one.
//  2. Every run of at least MinSecretRun bytes that is also a substring
//     of secret becomes "[redacted]" (a secret shorter than that is
//     redacted whole), so a prefix of the key cut by the vendor, or a
//     key split in two by a separator, does not survive either.
//  3. URL user info, and the values of query parameters that name a
//     credential (key, api_key, token, …), become "[redacted]".
//  4. The result is cut to MaxMessage bytes, on a character boundary
//     and never inside a "[redacted]" mark.
//
// Redaction comes before the cut, so that the cut can only shorten what
// is already clean.
func Clean(s, secret string) string {
	s = normalise(s)
	s = redactSecret(s, secret)
	s = redactURLs(s)
	return cut(s, MaxMessage)
}

// normalise replaces what could vanish later (step 1 of [Clean]).
func normalise(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		switch {
		case r == '\t' || r == '\n' || r == '\r':
			b.WriteByte(' ')
		case r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r):
			b.WriteRune(utf8.RuneError)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// redactSecret replaces every run of s that is a substring of secret and
// at least MinSecretRun bytes long (step 2 of [Clean]).
func redactSecret(s, secret string) string {
	if secret == "" {
		return s
	}
	if len(secret) < MinSecretRun {
		return strings.ReplaceAll(s, secret, redacted)
	}
	// Every window of MinSecretRun bytes of the secret, as a number.
	windows := make(map[uint64]struct{}, len(secret)-MinSecretRun+1)
	for i := 0; i+MinSecretRun <= len(secret); i++ {
		windows[load(secret, i)] = struct{}{}
	}
	// Mark every byte of s inside a window that matches; the marked
	// stretches are the runs to redact.
	var marked []bool
	end := 0 // the end of the last matching window
	for i := 0; i+MinSecretRun <= len(s); i++ {
		if _, ok := windows[load(s, i)]; !ok {
			continue
		}
		if marked == nil {
			marked = make([]bool, len(s))
		}
		for j := max(i, end); j < i+MinSecretRun; j++ {
			marked[j] = true
		}
		end = i + MinSecretRun
	}
	if marked == nil {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		if !marked[i] {
			b.WriteByte(s[i])
			i++
			continue
		}
		b.WriteString(redacted)
		for i < len(s) && marked[i] {
			i++
		}
	}
	return b.String()
}

// load returns the MinSecretRun bytes of s at i as a number.
func load(s string, i int) uint64 {
	_ = s[i+7]
	return uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
}

// credentialParams are query parameter names whose values are
// credentials, lower case.
var credentialParams = map[string]bool{
	"key": true, "api_key": true, "apikey": true, "api-key": true, "x-api-key": true,
	"token": true, "access_token": true, "auth": true, "authorization": true,
	"password": true, "pass": true, "secret": true, "client_secret": true,
	"sig": true, "signature": true, "x-amz-signature": true, "x-goog-signature": true,
}

// redactURLs removes user info and credential query values from every
// URL in s (step 3 of [Clean]). A URL is found by its "://" and ends at
// a space, a quote or an angle bracket.
func redactURLs(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "://")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		i += len("://")
		b.WriteString(s[:i])
		s = s[i:]
		n := strings.IndexAny(s, " \"'<>`")
		if n < 0 {
			n = len(s)
		}
		b.WriteString(cleanURL(s[:n]))
		s = s[n:]
	}
}

// cleanURL cleans the part of a URL after its "://".
func cleanURL(u string) string {
	authority := u
	if n := strings.IndexAny(u, "/?#"); n >= 0 {
		authority = u[:n]
	}
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		u = redacted + u[at:]
	}
	q := strings.IndexByte(u, '?')
	if q < 0 {
		return u
	}
	query, frag := u[q+1:], ""
	if h := strings.IndexByte(query, '#'); h >= 0 {
		query, frag = query[:h], query[h:]
	}
	params := strings.Split(query, "&")
	for i, p := range params {
		name, _, ok := strings.Cut(p, "=")
		if ok && credentialParams[strings.ToLower(name)] {
			params[i] = name + "=" + redacted
		}
	}
	return u[:q+1] + strings.Join(params, "&") + frag
}

// cut returns s cut to at most n bytes and "…", on a character boundary
// and not inside a "[redacted]" mark (step 4 of [Clean]).
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = "…"
	n -= len(ellipsis)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	// A mark that straddles the cut goes whole.
	if i := strings.LastIndex(s[:n], "["); i >= 0 && i+len(redacted) > n && strings.HasPrefix(s[i:], redacted) {
		n = i
	}
	return s[:n] + ellipsis
}
