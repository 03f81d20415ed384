package render

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Every golden nginx.conf reads back as render made it: the same hash and
// profiles (names and bodies); one edited or of another hash does not.
func TestReadBackGivesTheProfilesRenderMade(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.conf"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden nginx.conf in testdata: %v", err)
	}
	withProfiles := 0
	for _, file := range files {
		conf, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		i := bytes.Index(conf, []byte(`init("`))
		if i < 0 {
			continue // not a whole nginx.conf
		}
		hash := string(conf[i+6 : i+6+64])
		cfg, err := ReadBack(conf, hash)
		if err != nil {
			t.Errorf("%s: %v", file, err)
			continue
		}
		want := bytes.Count(conf, []byte(profileHead))
		if len(cfg.Profiles) != want {
			t.Errorf("%s: %d profiles read back, the file has %d", file, len(cfg.Profiles), want)
		}
		if want > 0 {
			withProfiles++
		}
		if !slices.IsSortedFunc(cfg.Profiles, func(a, b Profile) int { return bytes.Compare([]byte(a.Name), []byte(b.Name)) }) {
			t.Errorf("%s: profiles not sorted", file)
		}
		edited := bytes.Replace(conf, []byte("pid nginx.pid;"), []byte("pid nginx2.pid;"), 1)
		if _, err := ReadBack(edited, hash); err == nil {
			t.Errorf("%s: an edited nginx.conf read back", file)
		}
		other := "0000000000000000000000000000000000000000000000000000000000000000"
		if _, err := ReadBack(conf, other); err == nil {
			t.Errorf("%s: read back for another hash", file)
		}
	}
	if withProfiles < 3 {
		t.Errorf("only %d golden configs have profiles: the test proves little", withProfiles)
	}
}
