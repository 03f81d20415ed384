package apply

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/restysync/restysync/agent/internal/luaapi"
	"github.com/restysync/restysync/agent/internal/model"
)

// WorkerNeeds lists what nginx's workers use under the shared dir at
// request time: the htpasswd files and the temp folders of request and
// response bodies. (The master reads nginx.conf and the Lua modules, and
// opens the sockets, before the workers start.)
func WorkerNeeds(authFiles []model.AuthFile) luaapi.AccessRequest {
	req := luaapi.AccessRequest{Write: []string{"tmp/client_body", "tmp/proxy"}}
	for _, f := range authFiles {
		req.Read = append(req.Read, f.Name)
	}
	slices.Sort(req.Read)
	return req
}

// Access asks a worker which of the paths it cannot use. Every worker runs
// as the same user, so one answer speaks for all.
func (c *LuaClient) Access(ctx context.Context, want luaapi.AccessRequest) ([]luaapi.AccessDenied, error) {
	body, err := json.Marshal(want)
	if err != nil {
		return nil, fmt.Errorf("encoding access request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://restysync/access", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("building access request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.status.Do(req)
	if err != nil {
		return nil, fmt.Errorf("asking lua for /access: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return nil, fmt.Errorf("asking lua for /access: %s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	var reply struct {
		Denied []luaapi.AccessDenied `json:"denied"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&reply); err != nil {
		return nil, fmt.Errorf("decoding lua's /access: %w", err)
	}
	return reply.Denied, nil
}

// AccessCheck is the nginx boot and the worker needs the last access check
// was made for: the workers are asked once per boot and each time the
// files they need change.
type AccessCheck struct{ checked string }

// Check asks lua's workers which of the paths they need (WorkerNeeds of
// files) they cannot use, unless a check was made for boot and these needs
// already; due is false then (the last answer stands).
func (a *AccessCheck) Check(ctx context.Context, lua *LuaClient, boot string, files []model.AuthFile) (denied []luaapi.AccessDenied, due bool, err error) {
	needs := WorkerNeeds(files)
	key := boot + "\x00" + strings.Join(needs.Read, "\x00")
	if key == a.checked {
		return nil, false, nil
	}
	denied, err = lua.Access(ctx, needs)
	if err != nil {
		return nil, true, err
	}
	a.checked = key
	return denied, true, nil
}
