package main

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/urfave/cli/v2"
	"github.com/xrash/smetrics"
)

// A mistyped flag, a value its type cannot hold, or an unknown command is
// one line: what is wrong, the type wanted or the nearest name, and where
// the help is. urfave/cli would print the whole help (fifty lines for run)
// before that line; its own suggestion (cli.SuggestFlag) is kept, but only
// shown when it is close enough to be a typo.

// suggestAbove is the Jaro-Winkler similarity (urfave/cli's measure) from
// which the nearest flag or command is offered: "sorce" and "source" are
// 0.96, "bogus" and "source" 0.58.
const suggestAbove = 0.8

// setUsageErrors gives the app and each of its commands usageError, and
// the app an action that refuses an unknown command.
func setUsageErrors(app *cli.App) {
	app.OnUsageError = usageError
	for _, c := range app.Commands {
		c.OnUsageError = usageError
	}
	app.Action = func(c *cli.Context) error {
		if c.NArg() == 0 {
			return cli.ShowAppHelp(c)
		}
		var names []string
		for _, cmd := range app.Commands {
			names = append(names, cmd.Name)
		}
		return fmt.Errorf("unknown command %q%s; see %s --help", c.Args().First(),
			didYouMean(c.Args().First(), names, ""), app.Name)
	}
}

// The errors of Go's flag package (urfave/cli parses with it) and of
// urfave/cli's environment variables.
var (
	unknownFlagError = regexp.MustCompile(`^flag provided but not defined: -+(.+)$`)
	badValueError    = regexp.MustCompile(`^invalid (?:boolean )?value "(.*)" for (?:flag )?-+([^:]+): `)
	badEnvError      = regexp.MustCompile(`^could not parse "(.*)" as \w+ value from environment variable "([^"]+)" for flag ([^:]+): `)
	noValueError     = regexp.MustCompile(`^flag needs an argument: -+(.+)$`)
)

// usageError is the OnUsageError of the app and of every command.
func usageError(c *cli.Context, err error, _ bool) error {
	help := c.App.Name + " --help"
	var flags []cli.Flag = c.App.Flags
	if c.Command != nil && c.Command.Name != "" && c.Command.Name != c.App.Name { // not the root
		help = c.App.Name + " " + c.Command.Name + " --help"
		flags = c.Command.Flags
	}
	msg := err.Error()
	if m := unknownFlagError.FindStringSubmatch(msg); m != nil {
		var names []string
		for _, f := range flags {
			names = append(names, f.Names()...)
		}
		return fmt.Errorf("unknown flag --%s%s; see %s", m[1], didYouMean(m[1], names, "--"), help)
	}
	if m := badValueError.FindStringSubmatch(msg); m != nil {
		return fmt.Errorf("--%s %q: want %s; see %s", m[2], m[1], wantedValue(flags, m[2]), help)
	}
	if m := badEnvError.FindStringSubmatch(msg); m != nil {
		return fmt.Errorf("$%s %q (--%s): want %s; see %s", m[2], m[1], m[3], wantedValue(flags, m[3]), help)
	}
	if m := noValueError.FindStringSubmatch(msg); m != nil {
		return fmt.Errorf("--%s needs a value; see %s", m[1], help)
	}
	return errors.New(strings.SplitN(msg, "\n", 2)[0] + "; see " + help)
}

// didYouMean is " (did you mean PREFIXNAME?)" for the nearest of names when
// it is close enough to given to be a typo of it, else "".
func didYouMean(given string, names []string, prefix string) string {
	best, bestScore := "", 0.0
	for _, name := range names {
		if len(name) < 2 { // -h and the like
			continue
		}
		// urfave/cli's own measure and parameters (cli.SuggestFlag).
		if score := smetrics.JaroWinkler(name, given, 0.7, 4); score > bestScore {
			best, bestScore = name, score
		}
	}
	if bestScore < suggestAbove {
		return ""
	}
	return " (did you mean " + prefix + best + "?)"
}

// wantedValue says what a flag's value must be, from its type.
func wantedValue(flags []cli.Flag, name string) string {
	for _, f := range flags {
		for _, n := range f.Names() {
			if n != name {
				continue
			}
			switch f.(type) {
			case *cli.IntFlag, *cli.Int64Flag, *cli.UintFlag, *cli.Uint64Flag:
				return "a whole number (int)"
			case *cli.Float64Flag:
				return "a number (float)"
			case *cli.DurationFlag:
				return "a duration with its unit, such as 500ms, 10s or 1m30s"
			case *cli.BoolFlag:
				return "true or false (--" + name + "=false)"
			}
		}
	}
	return "a value of its type"
}
