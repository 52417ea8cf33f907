package demo

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"

	ledger "github.com/eddy-streams/eddy/examples/ledger/pipeline"
	"github.com/eddy-streams/eddy/examples/ledger/pipeline/ledgerpb"
	"github.com/eddy-streams/eddy/internal/harness/verify"
)

// TestLedgerFormatsSurviveKillsAndBrokerRestart is issue 18's process
// test: the ledger with --format avro, and with protobuf, against `eddy
// broker --schema-registry`, SIGKILLed at least five times while payments
// flow, the broker (and its registry) restarted half-way. Confluent's
// Python client writes payments before the run and reads every balance
// after it; every balance is checked exactly once by the verifier (its
// own decoder) and the Python client decodes the same balances; the
// registry's subjects and ids survive the restart.
func TestLedgerFormatsSurviveKillsAndBrokerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test runs processes for about a minute per format")
	}
	python := confluentPython(t)
	for _, format := range []ledger.Format{ledger.Avro, ledger.Protobuf} {
		t.Run(string(format), func(t *testing.T) {
			t.Parallel() // each format has its own broker and registry
			regAddr := freeAddr(t)
			broker := startBrokerProc(t, "--schema-registry", regAddr)
			regURL := "http://" + regAddr
			// What the script needs to encode payments and decode
			// balances: for Avro the payment's schema (the balances'
			// comes with their ids); for Protobuf each message's file.
			paymentSchema, balanceSchema := ledger.PaymentAvroSchema, "-"
			if format == ledger.Protobuf {
				paymentSchema = descriptorBase64(t, ledgerpb.File_payment_proto)
				balanceSchema = descriptorBase64(t, ledgerpb.File_balance_proto)
			}
			// The non-Go producer first, on the topic as the ledger
			// creates it.
			createTopic(t, broker.addr, inputTopic, 4)
			const preloaded = 2000
			out := runPython(t, python, "produce", string(format), broker.addr, regURL, inputTopic, strconv.Itoa(preloaded), paymentSchema)
			t.Logf("confluent_kafka (librdkafka, murmur2 partitioner) wrote %s payments in %s", strings.TrimSpace(out), format)

			var before map[string]int
			runLedgerCrash(t, broker, Options{
				Format:      format,
				RegistryURL: regURL,
				Preloaded:   preloaded,
				MidRun: func() error {
					before = subjectIDs(t, regURL)
					return broker.restart()
				},
			}, 10000+preloaded)
			after := subjectIDs(t, regURL)
			want := map[string]int{"payments-value": before["payments-value"], "balances-value": before["balances-value"]}
			for s, id := range want {
				if id == 0 || after[s] != id {
					t.Errorf("subject %s: latest id %d before the broker restart, %d after", s, id, after[s])
				}
			}
			t.Logf("registry subjects across the broker restart: before %v, after %v", before, after)

			// Eddy's verifier decoded the balances with its own decoder;
			// Confluent's client must decode the same ones.
			ctx := t.Context()
			recs, err := verify.ReadAll(ctx, []string{broker.addr}, outputTopic)
			if err != nil {
				t.Fatal(err)
			}
			tc, err := verify.NewTranscoder(regURL)
			if err != nil {
				t.Fatal(err)
			}
			decoded, err := tc.Records(ctx, recs)
			if err != nil {
				t.Fatal(err)
			}
			var goLines []string
			for _, r := range decoded {
				goLines = append(goLines, canonicalBalance(t, r.Value))
			}
			pyOut := runPython(t, python, "consume", string(format), broker.addr, regURL, outputTopic, strconv.Itoa(len(recs)), balanceSchema)
			var pyLines []string
			sc := bufio.NewScanner(strings.NewReader(pyOut))
			for sc.Scan() {
				pyLines = append(pyLines, canonicalBalance(t, sc.Bytes()))
			}
			slices.Sort(goLines)
			slices.Sort(pyLines)
			if !slices.Equal(goLines, pyLines) {
				t.Fatalf("confluent_kafka decoded %d balances, eddy's verifier %d, and they differ (first: %v / %v)", len(pyLines), len(goLines), first(pyLines), first(goLines))
			}
			py := 0
			for _, l := range goLines {
				if strings.Contains(l, `"id":"py-`) {
					py++
				}
			}
			if py != preloaded {
				t.Fatalf("%d balances of the Python client's payments, want %d", py, preloaded)
			}
			t.Logf("confluent_kafka (read_committed) decoded the %d %s balances eddy's verifier checked, %d of them of its own payments", len(pyLines), format, py)
		})
	}
}

// descriptorBase64 is file's FileDescriptorProto, serialized and
// base64-encoded, from which the Python script builds the message class.
func descriptorBase64(t *testing.T, file protoreflect.FileDescriptor) string {
	t.Helper()
	b, err := proto.Marshal(protodesc.ToFileDescriptorProto(file))
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// canonicalBalance re-encodes a balance's JSON with its fields in one
// order and its numbers as integers, so that the two decoders' lines
// compare.
func canonicalBalance(t *testing.T, b []byte) string {
	t.Helper()
	var v struct {
		ID      string `json:"id"`
		Account string `json:"account"`
		Amount  int64  `json:"amount"`
		Seq     int64  `json:"seq"`
		Balance int64  `json:"balance"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not a balance: %q: %v", b, err)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

func first(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return s[0]
}

// subjectIDs returns the latest schema id of every subject of the
// registry at url.
func subjectIDs(t *testing.T, url string) map[string]int {
	t.Helper()
	cl, err := sr.NewClient(sr.URLs(url))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	subjects, err := cl.Subjects(ctx)
	if err != nil {
		t.Fatalf("registry subjects: %v", err)
	}
	ids := map[string]int{}
	for _, s := range subjects {
		latest, err := cl.SchemaByVersion(ctx, s, -1)
		if err != nil {
			t.Fatalf("registry subject %s: %v", s, err)
		}
		ids[s] = latest.ID
	}
	return ids
}

func createTopic(t *testing.T, addr, topic string, partitions int32) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopic(t.Context(), partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
}

// confluentPython returns a python3 that imports Confluent's client with
// its Avro (python3-avro) and Protobuf (python3-protobuf) serializers. It
// skips the test where they are missing, unless EDDY_REQUIRE_CONFLUENT_PYTHON
// is set (CI sets it, so CI never skips).
func confluentPython(t *testing.T) string {
	t.Helper()
	const install = "apt-get install python3-confluent-kafka python3-requests python3-avro python3-protobuf"
	const imports = "import confluent_kafka.avro, confluent_kafka.schema_registry.protobuf, google.protobuf"
	// Debian's packages are for Debian's python; a python3 earlier in
	// PATH (pyenv) may not see them.
	candidates := []string{"/usr/bin/python3"}
	if p, err := exec.LookPath("python3"); err == nil {
		candidates = append(candidates, p)
	}
	for _, p := range candidates {
		if exec.Command(p, "-c", imports).Run() == nil {
			return p
		}
	}
	why := fmt.Sprintf("no python3 imports Confluent's client with Avro and Protobuf (%s)", imports)
	if os.Getenv("EDDY_REQUIRE_CONFLUENT_PYTHON") != "" {
		t.Fatalf("EDDY_REQUIRE_CONFLUENT_PYTHON is set but %s; %s", why, install)
	}
	t.Skipf("%s: %s; set EDDY_REQUIRE_CONFLUENT_PYTHON=1 to make this a failure", why, install)
	return ""
}

func runPython(t *testing.T, python string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, append([]string{"testdata/confluent_ledger.py"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("confluent_ledger.py %s: %v\n%s", args[0], err, stderr.String())
	}
	return string(out)
}
