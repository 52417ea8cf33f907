// Package inspect reports what an instance's state directory holds: for
// each application, its task databases and global stores, with their
// stores, key counts, sizes and the offsets they reflect. It backs
// `eddy inspect`; it reads the databases read-only and never changes them.
package inspect

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/eddy-streams/eddy/state"
	"github.com/eddy-streams/eddy/state/pebble"
)

// App is one application's directory (StateDir/AppID).
type App struct {
	ID  string `json:"app_id"`
	Dir string `json:"dir"`
	// DBs are the task databases (named by task, "0_3") and the global
	// stores ("global/NAME"), in name order.
	DBs []DB `json:"databases"`
}

// DB is one database.
type DB struct {
	Name string `json:"name"`
	// InUse: a running process holds the database; only its size on disk
	// is known (ask the instance: GET /v1/status).
	InUse bool `json:"in_use,omitempty"`
	// Err is why the database could not be read, if it could not.
	Err string `json:"error,omitempty"`
	// Corrupt: the database is damaged (Err says how). eddy discards it
	// and rebuilds it when the task or global store next opens.
	Corrupt    bool                  `json:"corrupt,omitempty"`
	DiskBytes  uint64                `json:"disk_bytes"`
	Tables     int64                 `json:"tables"`
	Stores     []pebble.StoreSummary `json:"stores,omitempty"`
	Input      map[string]int64      `json:"input_offsets,omitempty"`
	Changelog  map[string]int64      `json:"changelog_offsets,omitempty"`
	StreamTime *time.Time            `json:"stream_time,omitempty"`
}

var taskDir = regexp.MustCompile(`^[0-9]+_[0-9]+$`)

// Dir inspects stateDir: the application appID, or every application in it
// when appID is empty.
func Dir(stateDir, appID string) ([]App, error) {
	ids := []string{appID}
	if appID == "" {
		entries, err := os.ReadDir(stateDir)
		if err != nil {
			return nil, fmt.Errorf("inspect: --state-dir: %w", err)
		}
		ids = ids[:0]
		for _, e := range entries {
			if e.IsDir() {
				ids = append(ids, e.Name())
			}
		}
	}
	var apps []App
	for _, id := range ids {
		app, err := inspectApp(filepath.Join(stateDir, id), id)
		if err != nil {
			return nil, err
		}
		if len(app.DBs) > 0 || appID != "" {
			apps = append(apps, app)
		}
	}
	if len(apps) == 0 {
		return nil, fmt.Errorf("inspect: no application state in %s (expected STATE_DIR/APP_ID/TASK, e.g. %s)",
			stateDir, filepath.Join(stateDir, "ledger", "0_0"))
	}
	return apps, nil
}

func inspectApp(dir, id string) (App, error) {
	app := App{ID: id, Dir: dir}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return app, fmt.Errorf("inspect: app %s: %w", id, err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() && taskDir.MatchString(e.Name()) {
			names = append(names, e.Name())
		}
	}
	if globals, err := os.ReadDir(filepath.Join(dir, "global")); err == nil {
		for _, g := range globals {
			if g.IsDir() {
				names = append(names, "global/"+g.Name())
			}
		}
	}
	sort.Slice(names, func(i, j int) bool { return taskLess(names[i], names[j]) })
	for _, name := range names {
		app.DBs = append(app.DBs, inspectDB(filepath.Join(dir, filepath.FromSlash(name)), name))
	}
	return app, nil
}

// taskLess orders tasks numerically ("0_2" before "0_10"), globals last.
func taskLess(a, b string) bool {
	ga, gb := strings.HasPrefix(a, "global/"), strings.HasPrefix(b, "global/")
	switch {
	case ga && gb:
		return a < b
	case ga || gb:
		return gb // tasks before globals
	}
	var sa, pa, sb, pb int
	fmt.Sscanf(a, "%d_%d", &sa, &pa)
	fmt.Sscanf(b, "%d_%d", &sb, &pb)
	if sa != sb {
		return sa < sb
	}
	return pa < pb
}

func inspectDB(dir, name string) DB {
	db := DB{Name: name}
	sum, err := pebble.Inspect(dir)
	if err != nil {
		db.InUse = errors.Is(err, pebble.ErrInUse)
		db.Corrupt = errors.Is(err, state.ErrCorrupt)
		if !db.InUse {
			db.Err = err.Error()
		}
		db.DiskBytes = DirSize(dir)
		return db
	}
	db.DiskBytes, db.Tables, db.Stores = sum.DiskBytes, sum.Tables, sum.Stores
	if len(sum.Offsets.Input) > 0 {
		db.Input = map[string]int64{}
		for tp, o := range sum.Offsets.Input {
			db.Input[tp.String()] = o
		}
	}
	if len(sum.Offsets.Changelog) > 0 {
		db.Changelog = sum.Offsets.Changelog
	}
	if sum.Offsets.StreamTime != state.NoStreamTime {
		t := time.UnixMilli(sum.Offsets.StreamTime).UTC()
		db.StreamTime = &t
	}
	return db
}

// DirSize is the size of the files under dir (0 if it cannot be read);
// eddy demo reports its data directory's with it too.
func DirSize(dir string) uint64 {
	var n uint64
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				n += uint64(info.Size())
			}
		}
		return nil
	})
	return n
}

// WriteText writes apps as tables, one line per store of each database.
func WriteText(w io.Writer, apps []App) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for i, app := range apps {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		fmt.Fprintf(tw, "app %s (%s)\n", app.ID, app.Dir)
		fmt.Fprintln(tw, "DATABASE\tSTORE\tKEYS\tDATA\tDISK\tINPUT OFFSETS\tCHANGELOG OFFSETS\tSTREAM TIME")
		for _, db := range app.DBs {
			switch {
			case db.InUse:
				fmt.Fprintf(tw, "%s\t(in use by a running instance: see its /v1/status)\t\t\t%s\t\t\t\n", db.Name, BytesText(db.DiskBytes))
				continue
			case db.Corrupt:
				fmt.Fprintf(tw, "%s\t(corrupt: see the error below)\t\t\t%s\t\t\t\n", db.Name, BytesText(db.DiskBytes))
				continue
			case db.Err != "":
				fmt.Fprintf(tw, "%s\t(unreadable: %s)\t\t\t%s\t\t\t\n", db.Name, db.Err, BytesText(db.DiskBytes))
				continue
			}
			stream := "-"
			if db.StreamTime != nil {
				stream = db.StreamTime.Format(time.RFC3339Nano)
			}
			stores := db.Stores
			if len(stores) == 0 {
				stores = []pebble.StoreSummary{{Name: "(empty)"}}
			}
			for j, s := range stores {
				if j == 0 {
					fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", db.Name, s.Name, s.Keys, BytesText(uint64(s.KeyBytes+s.ValueBytes)),
						BytesText(db.DiskBytes), offsetsText(db.Input), offsetsText(db.Changelog), stream)
				} else {
					fmt.Fprintf(tw, "\t%s\t%d\t%s\t\t\t\t\n", s.Name, s.Keys, BytesText(uint64(s.KeyBytes+s.ValueBytes)))
				}
			}
		}
	}
	return tw.Flush()
}

func offsetsText(m map[string]int64) string {
	if len(m) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(m))
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// BytesText writes n bytes for a reader: "157.3 MiB".
func BytesText(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// Corrupt returns the databases of apps that are corrupt, one line each:
// "APP_ID/NAME: what is damaged".
func Corrupt(apps []App) []string {
	var lines []string
	for _, app := range apps {
		for _, db := range app.DBs {
			if db.Corrupt {
				lines = append(lines, app.ID+"/"+db.Name+": "+db.Err)
			}
		}
	}
	return lines
}
