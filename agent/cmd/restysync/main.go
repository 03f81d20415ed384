// Command restysync is the agent: it keeps a stock OpenResty in step with
// Kubernetes (or a folder of manifests). See the README for the flags.
package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"
)

// Set at build time with -ldflags "-X main.version=... -X main.commit=...".
var (
	version = "dev"
	commit  = ""
)

func main() {
	if err := newApp().Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "restysync:", err)
		os.Exit(1)
	}
}

func newApp() *cli.App {
	app := &cli.App{
		Name:                 "restysync",
		Usage:                "keep a stock OpenResty in step with Kubernetes",
		Version:              versionString(),
		HideVersion:          true,
		EnableBashCompletion: false,
		Commands: []*cli.Command{
			runCommand(),
			inspectCommand(),
			checkCommand(),
			{
				Name:  "version",
				Usage: "print the version and commit",
				Action: func(c *cli.Context) error {
					fmt.Fprintln(c.App.Writer, "restysync", versionString())
					return nil
				},
			},
		},
	}
	setUsageErrors(app)
	return app
}
