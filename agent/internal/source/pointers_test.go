package source

import (
	"fmt"
	"testing"
)

// Past maxSharedValues values, a new value keeps its own pointer; a value
// the table holds is still shared.
func TestSharedValuesBound(t *testing.T) {
	var table sharedValues
	for i := range maxSharedValues {
		s := fmt.Sprint(i)
		table.string(&s)
	}
	extra := "extra"
	if got := table.string(&extra); got != &extra || *got != "extra" || len(table.strings) != maxSharedValues {
		t.Errorf("past the bound: %q, own pointer %v, %d values held", *got, got == &extra, len(table.strings))
	}
	zero := "0"
	if got := table.string(&zero); got == &zero || *got != "0" {
		t.Errorf("a held value is not shared: %q", *got)
	}
}
