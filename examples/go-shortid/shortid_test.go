package shortid

import (
	"regexp"
	"testing"

	"github.com/google/uuid"
)

func TestFromGroupsDigits(t *testing.T) {
	u := uuid.MustParse("0f8fad5b-d9cb-469f-a165-70867728950e")
	if got, want := From(u), "0f8f-ad5b-d9cb"; got != want {
		t.Errorf("From(%s) = %q, want %q", u, got, want)
	}
}

func TestNewHasTheShape(t *testing.T) {
	shape := regexp.MustCompile(`^[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}$`)
	for i := 0; i < 100; i++ {
		if id := New(); !shape.MatchString(id) {
			t.Fatalf("New() = %q, want three groups of four hex digits", id)
		}
	}
}
