package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/eddy-streams/eddy/internal/harness/inspect"
)

// runInspect prints what a state directory holds: tasks, stores, keys,
// sizes and offsets.
func runInspect(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	stateDir := fs.String("state-dir", "", "an instance's state directory (the app's --state-dir; required)")
	appID := fs.String("app-id", "", "only this application's state (default: every application in --state-dir)")
	asJSON := fs.Bool("json", false, "print JSON instead of tables")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: eddy inspect --state-dir DIR [--app-id ID] [--json]\n\nPrints each task database and global store of a stopped instance: stores, keys,\nsizes, input and changelog offsets, stream time. Databases a running instance holds\nare listed with their size only. Read-only.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: every option is a flag, see -h", fs.Arg(0))
	}
	if *stateDir == "" {
		return errors.New("--state-dir is required: the directory an app was run with (its --state-dir)")
	}
	apps, err := inspect.Dir(*stateDir, *appID)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(apps)
	}
	return inspect.WriteText(os.Stdout, apps)
}
