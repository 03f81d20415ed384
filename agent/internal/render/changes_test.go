package render

import (
	"slices"
	"testing"

	"github.com/restysync/restysync/agent/internal/model"
)

// Changes names what makes two configs differ: profiles added and
// retired, a listener, a ConfigMap setting; and says so when the config
// nginx runs is not known.
func TestChangesNamesWhatDiffers(t *testing.T) {
	plain := model.Model{Servers: model.ListOf(&model.Server{Host: "app.example.com", Locations: []model.Location{
		loc("/", model.PathPrefix, "default/web:80"),
	}})}
	buffered := func(size string) model.Model {
		upload := loc("/upload", model.PathPrefix, "default/upload:80")
		own(&upload.Proxy).BufferSize = size
		return model.Model{Servers: model.ListOf(&model.Server{Host: "app.example.com", Locations: []model.Location{
			loc("/", model.PathPrefix, "default/web:80"), upload,
		}})}
	}
	slow, slower := buffered("16k"), buffered("32k")
	otherPort := goldenSettings
	otherPort.HTTPPort = 8080
	gzip := DefaultHTTP()
	gzip.Gzip = !gzip.Gzip
	withGzip := goldenSettings
	withGzip.HTTP = &gzip

	render := func(m model.Model, s Settings) Config {
		t.Helper()
		cfg, err := Render(m, s)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	base := render(plain, goldenSettings)
	for _, tc := range []struct {
		name     string
		from, to Config
		want     []string
	}{
		{"same config", base, render(plain, goldenSettings), nil},
		{"a location with a buffer size", base, render(slow, goldenSettings), []string{"1 new profile"}},
		{"its buffer size changed", render(slow, goldenSettings), render(slower, goldenSettings), []string{"1 new profile", "1 profile retired"}},
		{"it left", render(slow, goldenSettings), base, []string{"1 profile retired"}},
		{"the HTTP port", base, render(plain, otherPort), []string{ReasonListener}},
		{"a ConfigMap setting", base, render(plain, withGzip), []string{ReasonGlobal}},
		{"nginx runs an unknown config", Config{Hash: "other"}, base, []string{ReasonUnknownRunning}},
	} {
		if got := Changes(tc.from, tc.to); !slices.Equal(got, tc.want) {
			t.Errorf("%s: Changes = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// Every field of the view the template prints is compared: a field that
// no part names counts as a global setting rather than going unexplained.
func TestChangesCoversEveryViewField(t *testing.T) {
	base, err := Render(model.Model{}, goldenSettings)
	if err != nil {
		t.Fatal(err)
	}
	other := base
	view := *base.view
	view.WorkerProcesses = "7"
	other.view, other.Hash = &view, "other"
	if got := Changes(base, other); !slices.Equal(got, []string{ReasonGlobal}) {
		t.Errorf("worker_processes changed: Changes = %q, want %q", got, ReasonGlobal)
	}
	other.view = base.view
	if got := Changes(base, other); !slices.Equal(got, []string{ReasonTemplate}) {
		t.Errorf("same view, other hash: Changes = %q, want %q", got, ReasonTemplate)
	}
}
