//go:build e2ehooks

package snapshot

import (
	"encoding/json"
	"fmt"
	"os"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/restysync/restysync/agent/internal/model"
)

// E2ESnapshotFile names the environment variable that, in a binary built
// with the tag e2ehooks (as the e2e tests build the agent), makes Build
// write each snapshot it makes, as JSON, to the file it holds (the last
// one wins). The e2e tests compare the snapshots of the agent, check and
// inspect --source with it.
const E2ESnapshotFile = "RESTYSYNC_E2E_SNAPSHOT_FILE"

func init() {
	path := os.Getenv(E2ESnapshotFile)
	if path == "" {
		return
	}
	e2eBuilt = func(snap model.Snapshot) {
		data, err := json.Marshal(withServiceLabels(snap))
		if err == nil {
			err = os.WriteFile(path+".tmp", data, 0o644)
		}
		if err == nil {
			err = os.Rename(path+".tmp", path)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", E2ESnapshotFile, err)
		}
	}
}

// withServiceLabels returns snap with each EndpointSlice its source held
// without its label (SliceServices answers for it) copied with the label
// back, so the JSON says which Service every slice belongs to whichever
// way its source held it.
func withServiceLabels(snap model.Snapshot) model.Snapshot {
	slices := make([]*discoveryv1.EndpointSlice, snap.EndpointSlices.Len())
	for i, slice := range snap.EndpointSlices.Slice() {
		slices[i] = slice
		if service := snap.ServiceOfSlice(slice); slice.Labels == nil && service != "" {
			labelled := *slice
			labelled.Labels = map[string]string{discoveryv1.LabelServiceName: service}
			slices[i] = &labelled
		}
	}
	// The source's index by Service holds the slices without labels.
	snap.EndpointSlices, snap.SlicesOf = model.ListOf(slices...), nil
	return snap
}
