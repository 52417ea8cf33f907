package verify

import (
	"context"
	"testing"

	"github.com/eddy-streams/eddy/internal/testutil/registrytest"

	ledger "github.com/eddy-streams/eddy/examples/ledger/pipeline"
	"github.com/eddy-streams/eddy/serde/registry"
)

// TestTranscoder: the verifier's own decoder reads what the ledger's
// serdes write, in both formats, and refuses what is not framed or names
// an unknown schema.
func TestTranscoder(t *testing.T) {
	url := registrytest.Start(t)
	reg, err := registry.New(registry.Config{URLs: []string{url}})
	if err != nil {
		t.Fatal(err)
	}
	tc, err := NewTranscoder(url)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, format := range []ledger.Format{ledger.Avro, ledger.Protobuf} {
		codecs, err := ledger.NewCodecs(ctx, format, reg, "payments-"+string(format), "balances-"+string(format))
		if err != nil {
			t.Fatal(err)
		}
		b, err := codecs.Balances.Serialize(nil, ledger.Balance{ID: "p1", Account: "a", Amount: -5, Seq: 3, Balance: 1 << 40})
		if err != nil {
			t.Fatal(err)
		}
		got, err := tc.JSON(ctx, b)
		want := `{"account":"a","amount":-5,"balance":1099511627776,"id":"p1","seq":3}`
		if err != nil || string(got) != want {
			t.Errorf("%s balance: %s (%v), want %s", format, got, err, want)
		}
	}
	for _, bad := range [][]byte{[]byte(`{"id":"p1"}`), {0, 0, 0, 0x7f, 0xff, 2}, {0}} {
		if got, err := tc.JSON(ctx, bad); err == nil {
			t.Errorf("%q decoded as %s, want an error", bad, got)
		}
	}
}
