// Package shortid makes short, human-friendly identifiers for log lines and URLs from
// random UUIDs: the first Length hex digits of the UUID, grouped by Group digits.
package shortid

import (
	"strings"

	"github.com/google/uuid"
)

// Length is the number of hex digits of a short id; Group the size of its dash-separated groups.
const (
	Length = 12
	Group  = 4
)

// New returns a short id made from a new random UUID.
func New() string { return From(uuid.New()) }

// From returns the short id of u: its first Length hex digits in groups of Group,
// e.g. "0f8f-ad5b-d9cb".
func From(u uuid.UUID) string {
	hex := strings.ReplaceAll(u.String(), "-", "")[:Length]
	var b strings.Builder
	for i := 0; i < len(hex); i += Group {
		if i > Group {
			b.WriteByte('-')
		}
		b.WriteString(hex[i : i+Group])
	}
	return b.String()
}
