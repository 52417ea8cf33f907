package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

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
		fmt.Fprintln(fs.Output(), "usage: eddy inspect --state-dir DIR [--app-id ID] [--json]\n\nPrints each task database and global store of a stopped instance: stores, keys,\nsizes, input and changelog offsets, stream time. Databases a running instance holds\nare listed with their size only. Read-only. Every table's checksums are verified;\na corrupt database is reported and the exit status is 1.\n\nflags:")
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
		err = enc.Encode(apps)
	} else {
		err = inspect.WriteText(os.Stdout, apps)
	}
	if err != nil {
		return err
	}
	if bad := inspect.Corrupt(apps); len(bad) > 0 {
		return fmt.Errorf("%d corrupt database(s):\n  %s\nNothing to repair by hand: eddy discards a corrupt database when its task or global store next opens, and rebuilds it from the newest checkpoint and the changelog (a global store from its topic)", len(bad), strings.Join(bad, "\n  "))
	}
	return nil
}
