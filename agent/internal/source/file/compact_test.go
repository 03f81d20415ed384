package file

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A decoded file keeps its documents in a list of their number, not in
// the decoder's, which grew by appending and has up to twice the room.
func TestDecodedDocumentsKeepNoSpareRoom(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	for i := range 5 {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: s%d\n  namespace: default\nspec:\n  ports:\n  - port: 80\n", i)
	}
	path := filepath.Join(dir, "services.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	r := New(dir).decodeFile(path)
	if r.err != nil || len(r.docs) != 5 {
		t.Fatalf("decoded %d documents (err %v), want 5", len(r.docs), r.err)
	}
	if cap(r.docs) != len(r.docs) {
		t.Fatalf("5 documents held in a list with room for %d", cap(r.docs))
	}
}
