// Command conformance writes docs/conformance.md: for every reference
// contract, each statement of its registry (test/conformance/<contract>),
// the tests that prove it or the ADR of a deliberate deviation, and the
// counts. Run it from anywhere in the module:
//
//	go run ./internal/tools/conformance
//
// test/conformance/all fails while the committed table differs.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/simlock/simlock/test/conformance"
	"github.com/simlock/simlock/test/conformance/all"
)

func main() {
	out := flag.String("out", "", "write here instead of "+all.DocPath+" under the module root")
	flag.Parse()
	root, err := conformance.Root()
	if err != nil {
		log.Fatal(err)
	}
	idx, err := conformance.Scan(root)
	if err != nil {
		log.Fatal(err)
	}
	path := *out
	if path == "" {
		path = filepath.Join(root, all.DocPath)
	}
	if err := os.WriteFile(path, conformance.Render(all.Contracts(), idx), 0o644); err != nil {
		log.Fatal(err)
	}
	for _, c := range all.Contracts() {
		if len(c.Statements) == 0 {
			fmt.Printf("%s: no suite yet\n", c.Name)
			continue
		}
		n := conformance.Counts(c, idx)
		fmt.Printf("%s: %d statements, %d proven, %d deviating, %d open\n", c.Name, len(c.Statements),
			n[conformance.Proven], n[conformance.Deviating], n[conformance.Open])
		for _, p := range conformance.Problems(c, idx) {
			fmt.Printf("  %s\n", p)
		}
	}
}
