package eddy

import (
	"strings"
	"testing"
)

// TestOrphanErrorAdvice: the refusal names the new repartition topic that
// most likely replaced the old one and the fix that fits it, or says that
// none replaces it.
func TestOrphanErrorAdvice(t *testing.T) {
	o := orphanRepartition{topic: "app-rekey-1-repartition", committed: true, unconsumed: 5}
	moved := repartitionOrigin{topic: "app-rekey-2-repartition", name: "rekey-2", operator: "filter-2", moves: true}
	named := repartitionOrigin{topic: "app-by-user-repartition", name: "by-user", operator: "by-user"}
	kept := repartitionOrigin{topic: "app-kept-repartition", name: "kept", operator: "map-4"}
	existing := map[string]bool{o.topic: true, kept.topic: true}
	cases := []struct {
		name    string
		origins []repartitionOrigin
		want    []string
	}{
		{"moved", []repartitionOrigin{kept, moved}, []string{"new repartition topic app-rekey-2-repartition (the records of operator filter-2)", `eddy.Named(stream, "rekey-1")`}},
		{"renamed", []repartitionOrigin{kept, named}, []string{"new repartition topic app-by-user-repartition", `its old name "rekey-1" back`}},
		{"several", []repartitionOrigin{moved, named}, []string{"One of the topology's new repartition topics", "app-rekey-2-repartition (the records of operator filter-2), app-by-user-repartition"}},
		{"none", []repartitionOrigin{kept}, []string{"No new repartition topic of the topology replaces it"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			msg := orphanError("app", o, c.origins, existing).Error()
			for _, w := range append(c.want, "eddy: repartition topic app-rekey-1-repartition", "holds 5 records", "Config.AllowTopologyChange") {
				if !strings.Contains(msg, w) {
					t.Errorf("%q lacks %q", msg, w)
				}
			}
			if strings.Contains(msg, "app-kept-repartition") {
				t.Errorf("%q names a topic the brokers already have", msg)
			}
		})
	}
}
