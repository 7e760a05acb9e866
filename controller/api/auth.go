package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"unicode"

	"github.com/axsched/ax/pkg/protocol"
)

// Role is what a token may do.
type Role string

// Roles.
const (
	// RoleAdmin may call every route.
	RoleAdmin Role = "admin"
	// RoleRead may call only GET/HEAD routes.
	RoleRead Role = "read"
)

// MinTokenLen is the shortest accepted token.
const MinTokenLen = 16

// Token is a bearer token of the API. It is never logged: LogValue and
// String mask the secret.
type Token struct {
	// Name says who holds the token; it appears in audit lines.
	Name string `json:"name" yaml:"name" mapstructure:"name"`
	// Token is the secret, at least MinTokenLen printable characters.
	Token string `json:"token" yaml:"token" mapstructure:"token"`
	// Role is admin or read.
	Role Role `json:"role" yaml:"role" mapstructure:"role"`
}

// String returns the token with its secret masked.
func (t Token) String() string { return fmt.Sprintf("{%s %s %s}", t.Name, Mask(t.Token), t.Role) }

// LogValue masks the secret in structured logs.
func (t Token) LogValue() slog.Value {
	return slog.GroupValue(slog.String("name", t.Name), slog.String("role", string(t.Role)))
}

// Mask hides a secret: "" stays "", anything else becomes "****".
func Mask(secret string) string {
	if secret == "" {
		return ""
	}
	return "****"
}

// ValidateTokens checks a token list; errors name the entry as
// "tokens[i].field". Names and secrets must be unique.
func ValidateTokens(tokens []Token) error {
	names := map[string]int{}
	secrets := map[[32]byte]int{}
	for i, t := range tokens {
		f := fmt.Sprintf("tokens[%d]", i)
		if err := protocol.ValidateName(f+".name", t.Name); err != nil {
			return fmt.Errorf("%w: %w", ErrConfig, err)
		}
		if j, dup := names[t.Name]; dup {
			return fmt.Errorf("%w: %s.name: %q is also the name of tokens[%d]", ErrConfig, f, t.Name, j)
		}
		names[t.Name] = i
		if len(t.Token) < MinTokenLen {
			return fmt.Errorf("%w: %s.token: must be at least %d characters", ErrConfig, f, MinTokenLen)
		}
		for _, r := range t.Token {
			if r > unicode.MaxASCII || !unicode.IsPrint(r) || unicode.IsSpace(r) {
				return fmt.Errorf("%w: %s.token: must be printable ASCII without spaces", ErrConfig, f)
			}
		}
		h := sha256.Sum256([]byte(t.Token))
		if j, dup := secrets[h]; dup {
			return fmt.Errorf("%w: %s.token: same secret as tokens[%d]", ErrConfig, f, j)
		}
		secrets[h] = i
		switch t.Role {
		case RoleAdmin, RoleRead:
		default:
			return fmt.Errorf("%w: %s.role: must be admin or read, got %q", ErrConfig, f, t.Role)
		}
	}
	return nil
}

// authenticator checks bearer tokens. It holds SHA-256 digests so that
// every comparison takes the same time whatever the token's length.
type authenticator struct {
	tokens  []Token
	digests [][32]byte
}

func newAuthenticator(tokens []Token) *authenticator {
	a := &authenticator{tokens: tokens}
	for _, t := range tokens {
		a.digests = append(a.digests, sha256.Sum256([]byte(t.Token)))
	}
	return a
}

// enabled reports whether any token is configured; without tokens auth is off.
func (a *authenticator) enabled() bool { return len(a.tokens) > 0 }

// identify returns the token presented in r, or ok=false. It compares
// against every token, without early exit, in constant time.
func (a *authenticator) identify(r *http.Request) (Token, bool) {
	h := r.Header.Get("Authorization")
	scheme, secret, found := strings.Cut(h, " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return Token{}, false
	}
	d := sha256.Sum256([]byte(strings.TrimSpace(secret)))
	match := -1
	for i := range a.digests {
		if subtle.ConstantTimeCompare(d[:], a.digests[i][:]) == 1 {
			match = i
		}
	}
	if match < 0 {
		return Token{}, false
	}
	return a.tokens[match], true
}

// mutating reports whether a method changes state.
func mutating(method string) bool {
	return method != http.MethodGet && method != http.MethodHead && method != http.MethodOptions
}
